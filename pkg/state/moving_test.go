package state_test

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pods of a node being deleted are planned for at once, unbound;
// those that go with the node, or whose replacement is its own pod, are
// not.
func TestMoving(t *testing.T) {
	now := metav1.Now()
	mk := func(name, node string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	all := []*corev1.Pod{
		mk("web", "going", nil),
		mk("elsewhere", "staying", nil),
		mk("agent", "going", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent"}}
		}),
		mk("done", "going", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		mk("terminating", "going", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		mk("stays", "going", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists}}
		}),
	}
	got := state.Moving(all, map[string]bool{"going": true})
	if len(got) != 1 || got[0].Name != "web" || got[0].Spec.NodeName != "" {
		t.Fatalf("moving %v, want web unbound", got)
	}
	if all[0].Spec.NodeName != "going" {
		t.Fatal("the cache's pod was changed")
	}
	if state.Moving(all, nil) != nil {
		t.Fatal("pods moving with no node going")
	}
}
