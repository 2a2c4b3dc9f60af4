package localcluster

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var cluster *Cluster

func TestMain(m *testing.M) { os.Exit(Main(m, &cluster)) }

// TestFakeNodes checks the parts the autoscaler relies on: kwok acts as the
// kubelet of nodes annotated for it, the node lifecycle controller lifts the
// not-ready taint, and kube-scheduler binds pods that then run. A node kwok
// does not manage stays NotReady, as a node without a kubelet would.
func TestFakeNodes(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		annotated bool
		wantReady bool
	}{
		{name: "kwok-managed", annotated: true, wantReady: true},
		{name: "unmanaged", annotated: false, wantReady: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Labels: map[string]string{"kubernetes.io/hostname": tc.name}},
				Status: corev1.NodeStatus{
					Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
					Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				},
			}
			if tc.annotated {
				node.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
			}
			if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(ctx, tc.name, metav1.DeleteOptions{}) })
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "on-" + tc.name, Namespace: "default"},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": tc.name},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.9"}},
				},
			}
			if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				zero := int64(0)
				_ = cs.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			})

			// Wait for the good outcome; for the unmanaged node, waiting the
			// same time and not seeing it is the result.
			wait := 60 * time.Second
			if !tc.wantReady {
				wait = 10 * time.Second
			}
			var ready, running bool
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) && !(ready && running) {
				n, err := cs.CoreV1().Nodes().Get(ctx, tc.name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ready = nodeReady(n) && len(n.Spec.Taints) == 0
				p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				running = p.Status.Phase == corev1.PodRunning
				time.Sleep(250 * time.Millisecond)
			}
			if ready != tc.wantReady || running != tc.wantReady {
				t.Fatalf("node ready and untainted = %v, pod running = %v; want %v", ready, running, tc.wantReady)
			}
		})
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
