package localcluster

import (
	"context"
	"os"
	"slices"
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

// TestSlowShutdown: kwok plays a pod's shutdown as a kubelet does (see
// hack/kwok/pod-delete.yaml): a pod that says its shutdown takes a while
// (the pod-delete.stage.kwok.x-k8s.io/delay annotation) is gone only after
// it, and never after its grace period ends; others go at once.
func TestSlowShutdown(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "slow-shutdown", Labels: map[string]string{"kubernetes.io/hostname": "slow-shutdown"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}) })
	pods := []struct {
		name     string
		delay    string
		grace    int64
		atLeast  time.Duration
		deleteAt time.Time
	}{
		{name: "quick", grace: 30},
		{name: "slow", delay: "4s", grace: 8, atLeast: 4 * time.Second},
		{name: "capped", delay: "10m", grace: 3},
	}
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pods[i].name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: &pods[i].grace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.9"}}}}
		if pods[i].delay != "" {
			p.Annotations = map[string]string{"pod-delete.stage.kwok.x-k8s.io/delay": pods[i].delay}
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = cs.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	for _, p := range pods {
		waitPod(t, cs, p.name, func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	}
	for i := range pods {
		pods[i].deleteAt = time.Now()
		if err := cs.CoreV1().Pods("default").Delete(ctx, pods[i].name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	for len(gone) < len(pods) {
		for _, p := range pods {
			if slices.Contains(gone, p.name) {
				continue
			}
			if _, err := cs.CoreV1().Pods("default").Get(ctx, p.name, metav1.GetOptions{}); err == nil {
				continue
			}
			gone = append(gone, p.name)
			if lived := time.Since(p.deleteAt); lived < p.atLeast {
				t.Errorf("pod %s went %v after its deletion, before its %s shutdown ended", p.name, lived.Round(time.Millisecond), p.delay)
			}
		}
		if time.Since(pods[0].deleteAt) > time.Minute {
			t.Fatalf("after a minute only %v are gone", gone)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A pod that says nothing of its shutdown goes at once: before the
	// one whose shutdown takes seconds, though its grace period is longer.
	if gone[0] != "quick" {
		t.Errorf("pods went in the order %v; the quick one must go first", gone)
	}
}

// waitPod waits until ok holds for the pod (nil once it is gone).
func waitPod(t *testing.T, cs kubernetes.Interface, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			p = nil
		}
		if ok(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s never became what the test waits for: %v", name, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
