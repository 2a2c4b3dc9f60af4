package state

import (
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"k8s.io/utils/clock"
)

// RememberFor is how long a NodeClaim the provisioner created counts in its
// snapshots before the cache holds it. A cache a minute behind the API
// server is a cluster in trouble; past that the claim is most likely gone.
const RememberFor = 2 * time.Minute

// created are the NodeClaims this process created that its cache may not
// hold yet. At 10,000 pending pods the API server fell behind by more
// than the provisioner's wait for its cache, and each next batch, not
// seeing the claims it had just made, planned the same pods again: 1,767
// extra NodeClaims, which in turn timed out unlaunched.
type created struct {
	mu     sync.Mutex
	claims map[string]*v1.NodeClaim
}

// Remember counts nc in this cluster's snapshots until the cache holds it
// (or RememberFor has passed since it was created).
func (c *Cluster) Remember(nc *v1.NodeClaim) {
	c.created.mu.Lock()
	defer c.created.mu.Unlock()
	if c.created.claims == nil {
		c.created.claims = map[string]*v1.NodeClaim{}
	}
	c.created.claims[nc.Name] = nc.DeepCopy()
}

// withCreated is the cache's NodeClaims and the remembered ones it does
// not hold yet; those it holds, and those past RememberFor, are forgotten.
func (c *Cluster) withCreated(listed []v1.NodeClaim, clk clock.PassiveClock) []v1.NodeClaim {
	c.created.mu.Lock()
	defer c.created.mu.Unlock()
	if len(c.created.claims) == 0 {
		return listed
	}
	have := make(map[string]bool, len(listed))
	for i := range listed {
		have[listed[i].Name] = true
	}
	for name, nc := range c.created.claims {
		if have[name] || clk.Since(nc.CreationTimestamp.Time) > RememberFor {
			delete(c.created.claims, name)
			continue
		}
		listed = append(listed, *nc)
	}
	return listed
}
