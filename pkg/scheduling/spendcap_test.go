package scheduling

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSpendCap: a NodePool's spend cap is held like its limits. What its
// new nodes may cost (the dearest offering each may land on) plus what its
// nodes already cost never goes over it; the pods left pending are told
// the cap stopped them, by the annotation's name; a pool without a cap,
// or with a larger one, places them all.
func TestSpendCap(t *testing.T) {
	spotAndOD := func() *v1.NodePool {
		np := guide03Pool()
		np.Spec.Template.Spec.Requirements[2] = req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand")
		return np
	}
	for _, tc := range []struct {
		name string
		pool func() *v1.NodePool
		cap  string
		// inUse is what the pool's nodes already cost, $/h.
		inUse float64
		// wantPending says pods are left pending by the cap.
		wantPending bool
		// atLeast is what the plan's nodes must reach (the cap is used,
		// not merely not exceeded).
		atLeast float64
	}{
		{name: "no cap", pool: guide03Pool},
		{name: "on-demand pool capped at $2/h", pool: guide03Pool, cap: "2.00", wantPending: true, atLeast: 1.8},
		{name: "a cap with a dollar sign", pool: guide03Pool, cap: "$2", wantPending: true, atLeast: 1.8},
		{name: "spot and on-demand, counted at on-demand", pool: spotAndOD, cap: "2", wantPending: true, atLeast: 1.8},
		{name: "nodes already cost most of it", pool: guide03Pool, cap: "2", inUse: 1.75, wantPending: true, atLeast: 0.1},
		{name: "a cap the plan stays under", pool: guide03Pool, cap: "100"},
		{name: "a cap of nothing", pool: guide03Pool, cap: "0", wantPending: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := tc.pool()
			if tc.cap != "" {
				np.Annotations = map[string]string{spendcap.Annotation: tc.cap}
			}
			pods := replicas(100, "web", "1", "1Gi")
			p := solve(t, []*v1.NodePool{np}, pods, func(s *Snapshot) {
				s.NodePools[0].InUse = corev1.ResourceList{spendcap.Resource: *resource.NewQuantity(spendcap.Micro(tc.inUse), resource.DecimalSI)}
			})
			dearest := 0.0
			for _, nc := range p.NewNodeClaims {
				d := 0.0
				for _, o := range nc.InstanceType.Offerings {
					if np.Spec.Template.Spec.Requirements[2].Values[0] == "on-demand" && o.CapacityType != "on-demand" {
						continue
					}
					d = max(d, o.Price)
				}
				dearest += d
			}
			capped, _, err := spendcap.Of(np)
			if err != nil {
				t.Fatal(err)
			}
			if tc.cap != "" && tc.inUse+dearest > capped+1e-6 {
				t.Fatalf("nodes at their dearest cost $%.4f/h with $%.4f/h in use, over the cap of $%.2f/h:\n%s", dearest, tc.inUse, capped, summary(p))
			}
			if dearest < tc.atLeast {
				t.Fatalf("the plan's nodes cost $%.4f/h at their dearest, want at least $%.2f/h of the cap used:\n%s", dearest, tc.atLeast, summary(p))
			}
			if got := len(p.Unschedulable) > 0; got != tc.wantPending {
				t.Fatalf("pods pending: %v, want %v:\n%s", got, tc.wantPending, summary(p))
			}
			for _, u := range p.Unschedulable {
				if !strings.Contains(u.Reason, "spend cap") || !strings.Contains(u.Reason, spendcap.Annotation) {
					t.Fatalf("pending pod %s: %q names no spend cap", u.Pod.Name, u.Reason)
				}
			}
		})
	}
}

// TestSpendCapInvalid: a cap that is not a price leaves the pool out of
// every plan, and its pods are told the annotation and the fix.
func TestSpendCapInvalid(t *testing.T) {
	for _, value := range []string{"two dollars", "-1", "NaN", ""} {
		t.Run(value, func(t *testing.T) {
			np := guide03Pool()
			np.Annotations = map[string]string{spendcap.Annotation: value}
			p := solve(t, []*v1.NodePool{np}, replicas(3, "web", "1", "1Gi"))
			if len(p.NewNodeClaims) != 0 || len(p.Unschedulable) != 3 {
				t.Fatalf("a pool with an invalid cap planned:\n%s", summary(p))
			}
			if r := p.Unschedulable[0].Reason; !strings.Contains(r, "metadata.annotations["+spendcap.Annotation+"]") || !strings.Contains(r, "remove the annotation") {
				t.Fatalf("reason %q names neither the annotation nor the fix", r)
			}
		})
	}
}
