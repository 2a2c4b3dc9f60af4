package state

import (
	"context"
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RememberFor is how long a NodeClaim the provisioner created counts in its
// snapshots before the cache holds it. A cache a minute behind the API
// server is a cluster in trouble; past that the claim is most likely gone.
const RememberFor = 2 * time.Minute

// created are the NodeClaims this process created that its cache has not
// held yet. At 10,000 pending pods the API server fell more than 5 s behind,
// and each next batch, not seeing the claims it had just made, planned the
// same pods again: 1,878 NodeClaims that then timed out unlaunched
// (docs/benchmarks.md §7, run 1).
//
// A claim is forgotten as soon as the cache has held it (Seen), not when a
// snapshot lists it: a claim created, cached and deleted between two
// snapshots would otherwise count for RememberFor as capacity that is gone.
type created struct {
	mu     sync.Mutex
	claims map[string]remembered
}

// remembered is a created NodeClaim and when this process created it, by
// its own clock rather than the API server's.
type remembered struct {
	claim *v1.NodeClaim
	at    time.Time
}

// Remember counts nc in this cluster's snapshots until the cache has held
// it, or for RememberFor. A claim the cache already holds
// is not remembered: its informer event may have come before this call.
func (c *Cluster) Remember(ctx context.Context, nc *v1.NodeClaim) {
	c.created.mu.Lock()
	defer c.created.mu.Unlock()
	// Under the lock, so an informer event that lands after this read waits
	// for the claim to be remembered and then forgets it. The informer
	// stores an object before it tells its handlers.
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nc), &v1.NodeClaim{}); err == nil {
		return
	}
	if c.created.claims == nil {
		c.created.claims = map[string]remembered{}
	}
	c.created.claims[nc.Name] = remembered{claim: nc.DeepCopy(), at: c.clock().Now()}
}

// Seen is the NodeClaim informer's handler that ends remembering: every
// add, update or delete the cache receives means it has held the claim.
func (c *Cluster) Seen() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.seen,
		UpdateFunc: func(_, obj any) { c.seen(obj) },
		DeleteFunc: c.seen,
	}
}

func (c *Cluster) seen(obj any) {
	if gone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = gone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	c.created.mu.Lock()
	defer c.created.mu.Unlock()
	delete(c.created.claims, o.GetName())
}

// withCreated is the cache's NodeClaims and the remembered ones it does
// not hold yet; those past RememberFor are forgotten.
func (c *Cluster) withCreated(listed []v1.NodeClaim) []v1.NodeClaim {
	clk := c.clock()
	c.created.mu.Lock()
	defer c.created.mu.Unlock()
	if len(c.created.claims) == 0 {
		return listed
	}
	have := make(map[string]bool, len(listed))
	for i := range listed {
		have[listed[i].Name] = true
	}
	for name, r := range c.created.claims {
		if have[name] || clk.Since(r.at) > RememberFor {
			delete(c.created.claims, name)
			continue
		}
		listed = append(listed, *r.claim)
	}
	return listed
}

func (c *Cluster) clock() clock.PassiveClock {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}
