package viewer

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 36's NodeOverlay acceptance in the viewer: the nodes an overlay the
// controller applied selects are priced with it; an overlay it did not
// apply (no Ready status: the gate is off, or it conflicts) prices nothing.
func TestNodeOverlaysPriceNodes(t *testing.T) {
	overlay := func(name string, ready metav1.ConditionStatus, spec v1alpha1.NodeOverlaySpec) v1alpha1.NodeOverlay {
		o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		if ready != "" {
			o.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: "Ready"}}
		}
		return o
	}
	half := v1alpha1.NodeOverlaySpec{PriceAdjustment: ptr("-50%"),
		Requirements: []v1alpha1.NodeSelectorRequirement{{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}}}
	free := v1alpha1.NodeOverlaySpec{Price: ptr("0"), Requirements: []v1alpha1.NodeSelectorRequirement{}}
	cases := []struct {
		name     string
		overlays []v1alpha1.NodeOverlay
		m5, c6a  float64
		note     bool
	}{
		{"none", nil, 0.384, 0.306, false},
		{"applied", []v1alpha1.NodeOverlay{overlay("half", metav1.ConditionTrue, half)}, 0.192, 0.306, true},
		{"not applied", []v1alpha1.NodeOverlay{overlay("free", metav1.ConditionFalse, free), overlay("unjudged", "", free)}, 0.384, 0.306, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, NodePools: []v1.NodePool{nodePool("default")}, NodeOverlays: tc.overlays}
			m5 := kwokNode(nodeSpec{name: "m5", itype: "m5.2xlarge", ct: "on-demand", zone: "us-east-1a", pool: "default", ready: true})
			m5.Labels["karpenter.k8s.aws/instance-family"] = "m5"
			c6a := kwokNode(nodeSpec{name: "c6a", itype: "c6a.2xlarge", ct: "on-demand", zone: "us-east-1a", pool: "default", ready: true})
			c6a.Labels["karpenter.k8s.aws/instance-family"] = "c6a"
			in.Nodes = []corev1.Node{m5, c6a}
			in.NodeClaims = []v1.NodeClaim{claimFor(m5), claimFor(c6a)}
			s := Build(in, Options{}, &Prices{}, nil)
			for _, n := range s.Nodes {
				want := map[string]float64{"m5": tc.m5, "c6a": tc.c6a}[n.Name]
				if !n.Priced || n.Price != want {
					t.Errorf("%s priced $%v (%v), want $%v", n.Name, n.Price, n.Priced, want)
				}
			}
			if got := strings.Contains(strings.Join(s.PriceNotes, ";"), "NodeOverlay(s) applied"); got != tc.note {
				t.Errorf("notes %q: overlay note %v, want %v", s.PriceNotes, got, tc.note)
			}
			if s.PricePerHour != tc.m5+tc.c6a {
				t.Errorf("total $%v, want $%v", s.PricePerHour, tc.m5+tc.c6a)
			}
		})
	}
}
