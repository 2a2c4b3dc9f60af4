package record

import (
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestTracked: a PodDisruptionBudget there at the start is in the
// manifests, and each later change of its spec an apply event; an update
// of its status alone is none; one created during the recording is an
// apply event at its creation; one deleted is a delete event.
func TestTracked(t *testing.T) {
	pdb := func(name string, maxUnavailable int) *policyv1.PodDisruptionBudget {
		mu := intstr.FromInt32(int32(maxUnavailable))
		return &policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	}
	rec := New(t0)
	see := func(after time.Duration, p *policyv1.PodDisruptionBudget, created bool) {
		rec.Tracked(t0.Add(after), "PodDisruptionBudget", p.Namespace, p.Name, p, p.Spec, created)
	}
	see(0, pdb("web", 1), false)
	see(5*time.Minute, pdb("web", 1), false) // a status update: the same spec
	see(10*time.Minute, pdb("web", 0), false)
	see(20*time.Minute, pdb("batch", 2), true)
	rec.Untracked(t0.Add(30*time.Minute), "PodDisruptionBudget", "default", "batch")
	rec.Untracked(t0.Add(31*time.Minute), "PodDisruptionBudget", "default", "never-seen")
	trace, _, config, err := rec.Finish(t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range trace.Events {
		got = append(got, describe(e))
	}
	if want := "10m0s apply PodDisruptionBudget web; 20m0s apply PodDisruptionBudget batch; 30m0s delete PodDisruptionBudget default/batch"; strings.Join(got, "; ") != want {
		t.Errorf("events %q, want %q", strings.Join(got, "; "), want)
	}
	if len(config) != 1 || config[0].(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("manifests %+v, want web as it was at the start", config)
	}
}
