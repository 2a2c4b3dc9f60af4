package podevents_test

import (
	"context"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/podevents"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestMoved(t *testing.T) {
	running := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	with := func(f func(*corev1.Pod)) *corev1.Pod { p := running(); f(p); return p }
	pending := with(func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status.Phase = corev1.PodPending })
	terminating := with(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })
	failed := with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	restarted := with(func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 7}}
	})
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     bool
	}{
		{"bound", pending, running(), true},
		{"began terminating", running(), terminating, true},
		{"went terminal", running(), failed, true},
		{"deleted outright while running", running(), nil, true},
		{"a container restarted (crash loop)", running(), restarted, false},
		{"a status or label update", running(), with(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), false},
		{"still pending", pending, pending, false},
		{"deleted after it was seen terminating", terminating, nil, false},
		{"deleted after it went terminal", failed, nil, false},
		{"a terminating pod updated again", terminating, terminating, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podevents.Moved(tc.old, tc.cur); got != tc.want {
				t.Fatalf("Moved = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestReconcileStampsTheNodesClaim(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const pid = "aws:///us-west-2a/i-0123456789abcdef0"
	for _, tc := range []struct {
		name      string
		last      time.Time
		wantStamp time.Time
		// staleCache: the cache's copy of the claim predates the API
		// server's; the stamp, one field, still lands at once.
		staleCache bool
	}{
		{"never stamped", time.Time{}, now, false},
		{"stamped within the dedupe window", now.Add(-podevents.Dedupe / 2), now.Add(-podevents.Dedupe / 2), false},
		{"stamped before it", now.Add(-podevents.Dedupe), now, false},
		{"the cache is behind", time.Time{}, now, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
			nc.Status.ProviderID = pid
			nc.Status.LastPodEventTime = metav1.NewTime(tc.last)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: pid}}
			kube := fake.NewClientBuilder().WithScheme(operator.Scheme()).WithStatusSubresource(&v1.NodeClaim{}).
				WithIndex(&v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
				WithObjects(nc, node).Build()
			var reader client.Client = kube
			if tc.staleCache {
				reader = interceptor.NewClient(kube, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					if claims, ok := list.(*v1.NodeClaimList); ok {
						for i := range claims.Items {
							claims.Items[i].ResourceVersion = "1"
						}
					}
					return nil
				}})
			}
			c := &podevents.Controller{Client: reader, Clock: clocktesting.NewFakeClock(now)}
			if _, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
				t.Fatal(err)
			}
			got := &v1.NodeClaim{}
			if err := kube.Get(context.Background(), client.ObjectKey{Name: "c"}, got); err != nil {
				t.Fatal(err)
			}
			if !got.Status.LastPodEventTime.Time.Equal(tc.wantStamp) {
				t.Fatalf("LastPodEventTime %s, want %s", got.Status.LastPodEventTime.Time, tc.wantStamp)
			}
		})
	}
}
