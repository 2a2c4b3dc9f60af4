// Package taints answers the one question several controllers ask of a
// node's taints, with one rule: is this taint there (by key and effect, as
// MatchTaint compares them)?
package taints

import corev1 "k8s.io/api/core/v1"

// Has reports whether taints hold t, matched by key and effect.
func Has(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}
