package v1

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodePoolHash(t *testing.T) {
	a := corev1.Taint{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}
	b := corev1.Taint{Key: "b", Effect: corev1.TaintEffectNoExecute}
	c := corev1.Taint{Key: "c", Effect: corev1.TaintEffectPreferNoSchedule}
	base := func() *NodePool {
		np := &NodePool{}
		np.Spec.Template.Labels = map[string]string{"team": "a", "tier": "web"}
		np.Spec.Template.Spec.Taints = []corev1.Taint{a, b}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{b, c}
		np.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		return np
	}
	cases := []struct {
		name   string
		change func(*NodePool)
		drifts bool
	}{
		{"nothing", func(*NodePool) {}, false},
		{"taints reordered", func(np *NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{b, a} }, false},
		{"startup taints reordered", func(np *NodePool) { np.Spec.Template.Spec.StartupTaints = []corev1.Taint{c, b} }, false},
		{"labels written in another order", func(np *NodePool) { np.Spec.Template.Labels = map[string]string{"tier": "web", "team": "a"} }, false},
		{"no annotations written as an empty map", func(np *NodePool) { np.Spec.Template.Annotations = map[string]string{} }, false},
		{"requirements", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpExists}}
		}, false},
		{"a taint added", func(np *NodePool) { np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, c) }, true},
		{"a taint removed", func(np *NodePool) { np.Spec.Template.Spec.Taints = []corev1.Taint{a} }, true},
		{"a taint's value", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Value = "2" }, true},
		{"a taint moved to the startup taints", func(np *NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{b}
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{a, b, c}
		}, true},
		{"a label", func(np *NodePool) { np.Spec.Template.Labels["team"] = "b" }, true},
		{"an annotation", func(np *NodePool) { np.Spec.Template.Annotations = map[string]string{"x": "y"} }, true},
		{"the NodeClass", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }, true},
		{"terminationGracePeriod", func(np *NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := base()
			tc.change(np)
			if got := np.Hash() != base().Hash(); got != tc.drifts {
				t.Fatalf("hash changed = %v, want %v", got, tc.drifts)
			}
		})
	}
}

func TestSetHash(t *testing.T) {
	type doc struct {
		List  []string          `json:"list"`
		Map   map[string]string `json:"map"`
		Big   int64             `json:"big"`
		Inner [][]int           `json:"inner"`
	}
	cases := []struct {
		name string
		a, b doc
		same bool
	}{
		{"list order", doc{List: []string{"x", "y"}}, doc{List: []string{"y", "x"}}, true},
		{"nested list order", doc{Inner: [][]int{{1, 2}, {3}}}, doc{Inner: [][]int{{3}, {2, 1}}}, true},
		{"nil and empty", doc{}, doc{List: []string{}, Map: map[string]string{}}, true},
		{"a list element", doc{List: []string{"x"}}, doc{List: []string{"x", "y"}}, false},
		{"a repeated list element", doc{List: []string{"x"}}, doc{List: []string{"x", "x"}}, false},
		{"large integers keep their precision", doc{Big: 1 << 60}, doc{Big: 1<<60 + 1}, false},
		{"a map value", doc{Map: map[string]string{"k": "1"}}, doc{Map: map[string]string{"k": "2"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SetHash(tc.a) == SetHash(tc.b); got != tc.same {
				t.Fatalf("same hash = %v, want %v", got, tc.same)
			}
		})
	}
}
