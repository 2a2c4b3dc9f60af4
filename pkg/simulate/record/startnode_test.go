package record

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStartNode: a node a NodePool manages is recorded with its labels
// and the taints it was given; the taints of its state, and nodes no
// NodePool manages or already going, are not.
func TestStartNode(t *testing.T) {
	now := metav1.Now()
	taints := []corev1.Taint{
		{Key: "team", Value: "data", Effect: corev1.TaintEffectNoSchedule},
		{Key: v1.DisruptedNoScheduleTaint.Key, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule},
	}
	cases := []struct {
		name   string
		node   *corev1.Node
		taints int
		kept   bool
	}{
		{"managed", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1.LabelNodePool: "default"}}, Spec: corev1.NodeSpec{Taints: taints}}, 1, true},
		{"not managed", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, 0, false},
		{"going", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{v1.LabelNodePool: "default"}, DeletionTimestamp: &now}}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := startNode(c.node)
			if (got != nil) != c.kept {
				t.Fatalf("recorded: %v, want %v", got != nil, c.kept)
			}
			if got == nil {
				return
			}
			if len(got.Spec.Taints) != c.taints || got.Spec.Taints[0].Key != "team" || got.Kind != "Node" || got.Labels[v1.LabelNodePool] != "default" {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}
