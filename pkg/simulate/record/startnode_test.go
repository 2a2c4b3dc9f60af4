package record

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
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

// TestBarePodAtStart: a bare Pod there at the start is one of the run's
// manifests, without its node, which the run need not start from; one that
// goes is a delete event, and one never seen is no event.
func TestBarePodAtStart(t *testing.T) {
	rec := New(t0)
	rec.Pod(t0, lonePod("lone"), false)
	rec.PodGone(t0.Add(time.Minute), "default", "lone")
	rec.PodGone(t0.Add(2*time.Minute), "default", "never-seen")
	trace, _, config, err := rec.Finish(t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(config) != 1 {
		t.Fatalf("config %v; want the pod", config)
	}
	raw, _ := yaml.Marshal(config[0])
	if strings.Contains(string(raw), "nodeName") {
		t.Errorf("the recorded pod keeps its node:\n%s", raw)
	}
	if len(trace.Events) != 1 || describe(trace.Events[0]) != "1m0s delete Pod default/lone" {
		t.Errorf("events %v; want the one delete", trace.Events)
	}
}
