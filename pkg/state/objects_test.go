package state_test

import (
	"context"
	"reflect"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// storeInformers hands out client-go informers whose stores the test
// fills, as the manager's cache does; other methods are not used.
type storeInformers struct {
	cache.Informers
	byKind map[string]toolscache.SharedIndexInformer
}

func (s storeInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return s.byKind["pod"], nil
	case *corev1.Node:
		return s.byKind["node"], nil
	case *v1.NodeClaim:
		return s.byKind["nodeclaim"], nil
	}
	panic("unexpected kind")
}

// TestObjectsReadTheCacheInPlace holds Pods, Nodes and Pending to the
// cache's own objects, the same pointers the informer keeps, and to the
// client's List where there is no cache.
func TestObjectsReadTheCacheInPlace(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Namespace: "default"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	podInf := toolscache.NewSharedIndexInformer(nil, &corev1.Pod{}, 0, toolscache.Indexers{})
	nodeInf := toolscache.NewSharedIndexInformer(nil, &corev1.Node{}, 0, toolscache.Indexers{})
	for _, o := range []any{pending, bound} {
		if err := podInf.GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodeInf.GetStore().Add(node); err != nil {
		t.Fatal(err)
	}
	claimInf := toolscache.NewSharedIndexInformer(nil, &v1.NodeClaim{}, 0, toolscache.Indexers{})
	informers := storeInformers{byKind: map[string]toolscache.SharedIndexInformer{"pod": podInf, "node": nodeInf, "nodeclaim": claimInf}}
	// The client holds other objects: an answer from it shows.
	other := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "listed", Namespace: "default"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "listed"}},
	).Build()

	tests := []struct {
		name        string
		cluster     *state.Cluster
		wantPods    map[string]*corev1.Pod
		wantNodes   map[string]*corev1.Node
		wantPending []string
	}{
		{name: "with the cache, its own objects", cluster: &state.Cluster{Client: other, Cache: informers},
			wantPods:  map[string]*corev1.Pod{"waiting": pending, "running": bound},
			wantNodes: map[string]*corev1.Node{"a": node}, wantPending: []string{"waiting"}},
		{name: "without, the client's list", cluster: &state.Cluster{Client: other},
			wantPods: map[string]*corev1.Pod{"listed": nil}, wantNodes: map[string]*corev1.Node{"listed": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pods, err := tc.cluster.Pods(ctx)
			sameObjects(t, "pod", pods, err, tc.wantPods)
			nodes, err := tc.cluster.Nodes(ctx)
			sameObjects(t, "node", nodes, err, tc.wantNodes)
			waiting, err := tc.cluster.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range waiting {
				names = append(names, p.Name)
			}
			if len(names) != len(tc.wantPending) || (len(names) > 0 && names[0] != tc.wantPending[0]) {
				t.Fatalf("pending %v, want %v", names, tc.wantPending)
			}
		})
	}
}

// sameObjects checks that got holds the objects named in want, and where
// want gives one, that very object.
func sameObjects[T client.Object](t *testing.T, kind string, got []T, err error, want map[string]T) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d %ss, want %d", len(got), kind, len(want))
	}
	for _, o := range got {
		w, ok := want[o.GetName()]
		if !ok || (!reflect.ValueOf(w).IsNil() && any(w) != any(o)) {
			t.Fatalf("%s %s: not the object wanted (%p, want %p)", kind, o.GetName(), any(o), any(w))
		}
	}
}
