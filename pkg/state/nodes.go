package state

import corev1 "k8s.io/api/core/v1"

// NodeReady reports the node's Ready condition: a node that is not Ready
// takes no pods, and counts as disrupting in budgets.
func NodeReady(n *corev1.Node) bool { return nodeReady(n) }
