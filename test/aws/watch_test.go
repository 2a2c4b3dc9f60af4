package aws

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimWatch follows every NodeClaim change from the API server.
type claimWatch struct {
	mu sync.Mutex
	// disrupting holds the NodeClaims marked for disruption or being
	// deleted, until they are gone or their instance is terminating: a
	// drained node whose instance is ending no longer counts against a
	// budget, in Karpenter as in Joiner (disruption.CountBudgets).
	disrupting map[string]bool
	most       int
	drifted    map[string]string // NodeClaim -> Drifted reason, once seen
	reasons    map[string]string // NodeClaim -> DisruptionReason, once seen
	// seen holds every NodeClaim ("name/uid", so one deleted and created
	// again under the same name counts twice) with its last provider ID.
	seen map[string]string
	err  error
}

func watchClaims(t testing.TB) *claimWatch {
	t.Helper()
	c, err := client.NewWithWatch(framework.Cluster.Config, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wi, err := c.Watch(ctx, &v1.NodeClaimList{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &claimWatch{disrupting: map[string]bool{}, drifted: map[string]string{}, reasons: map[string]string{}, seen: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			nc, ok := ev.Object.(*v1.NodeClaim)
			if !ok {
				w.mu.Lock()
				w.err = fmt.Errorf("watch event %s of %T", ev.Type, ev.Object)
				w.mu.Unlock()
				continue
			}
			w.observe(ev.Type, nc)
		}
		if ctx.Err() == nil {
			w.mu.Lock()
			w.err = fmt.Errorf("the NodeClaim watch ended early")
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		wi.Stop()
		cancel()
		<-done
		if t.Failed() {
			w.mu.Lock()
			defer w.mu.Unlock()
			var keys []string
			for k, v := range w.seen {
				keys = append(keys, k+"="+v)
			}
			sort.Strings(keys)
			t.Logf("NodeClaims seen: %v", keys)
		}
	})
	return w
}

func (w *claimWatch) observe(typ watch.EventType, nc *v1.NodeClaim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key := nc.Name + "/" + string(nc.UID); nc.Status.ProviderID != "" || w.seen[key] == "" {
		w.seen[key] = nc.Status.ProviderID
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); c != nil && c.Status == "True" && w.drifted[nc.Name] == "" {
		w.drifted[nc.Name] = c.Reason
	}
	reason := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason)
	if reason != nil && reason.Status == "True" && w.reasons[nc.Name] == "" {
		w.reasons[nc.Name] = reason.Reason
	}
	switch {
	case typ == watch.Deleted || meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating):
		delete(w.disrupting, nc.Name)
	case nc.DeletionTimestamp != nil || (reason != nil && reason.Status == "True"):
		w.disrupting[nc.Name] = true
	default:
		delete(w.disrupting, nc.Name)
	}
	w.most = max(w.most, len(w.disrupting))
}

// results: the most NodeClaims disrupting at once, and each NodeClaim's
// Drifted reason and DisruptionReason as first seen.
func (w *claimWatch) results(t testing.TB) (int, map[string]string, map[string]string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatal(w.err)
	}
	return w.most, w.drifted, w.reasons
}

// providerIDs are the NodeClaims seen so far ("name/uid") and their last
// provider IDs.
func (w *claimWatch) providerIDs(t testing.TB) map[string]string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatal(w.err)
	}
	out := make(map[string]string, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}
