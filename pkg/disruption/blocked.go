package disruption

import (
	"fmt"
	"math"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// Blocked says why a node may not be disrupted voluntarily now, from the
// node, the pods bound to it and the cluster's PDBs; empty when it may.
// It is asked when candidates are chosen and again just before the drain,
// when pods that arrived meanwhile may have changed the answer.
func Blocked(node *corev1.Node, onNode []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) string {
	if node.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
		return fmt.Sprintf("node has %q", v1.AnnotationDoNotDisrupt+": true")
	}
	for _, p := range onNode {
		if pods.IsOwnedByNode(p) || pods.IsTerminal(p) {
			continue
		}
		if pods.DoNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s/%s has %q", p.Namespace, p.Name, v1.AnnotationDoNotDisrupt+": "+p.Annotations[v1.AnnotationDoNotDisrupt])
		}
		var matching []string
		for _, pdb := range pods.PDBsOf(p, pdbs) {
			matching = append(matching, pdb.Name)
			if pdb.Status.DisruptionsAllowed == 0 {
				return fmt.Sprintf("PDB %s/%s blocks the eviction of pod %s/%s (0 disruptions allowed)", pdb.Namespace, pdb.Name, p.Namespace, p.Name)
			}
		}
		if len(matching) > 1 {
			return fmt.Sprintf("pod %s/%s is covered by more than one PDB (%s), which the Eviction API refuses", p.Namespace, p.Name, strings.Join(matching, ", "))
		}
	}
	return ""
}

// Protected says why a candidate may not be disrupted voluntarily now:
// the provisioner launched or chose it for pending pods (nominatedFor, those
// still within their window), or a protection of its node or pods
// (Blocked). Empty when it may.
func Protected(c Candidate, node *corev1.Node, onNode []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget, nominatedFor []string, now time.Time) string {
	if why := Nominated(nominatedFor); why != "" {
		return why
	}
	if why := Blocked(node, onNode, pdbs, now); why != "" {
		return why
	}
	return ""
}

// unpriced says why consolidation leaves a node alone whose offering has no
// known price (its type, zone or capacity type left the pool's offerings):
// savings cannot be weighed against an unknown. Drift does not ask; a node
// that left its class is exactly what drift replaces.
func unpriced(c Candidate) string {
	if !math.IsInf(c.Price, 1) {
		return ""
	}
	return fmt.Sprintf("no price known for %s %s in %s", c.CapacityType, c.InstanceType, c.Zone)
}

// Nominated is the reason a node the provisioner launched, or chose, for
// pending pods is left alone: until they bind it looks empty, or emptier
// than it is. Empty when pods is.
func Nominated(pods []string) string {
	switch len(pods) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("nominated for pending pod %s, which the provisioner launched or chose it for", pods[0])
	}
	return fmt.Sprintf("nominated for pending pod %s and %d other(s), which the provisioner launched or chose it for", pods[0], len(pods)-1)
}
