// Package unavailable remembers the offerings (instance type, zone, capacity
// type) that EC2 recently answered with insufficient capacity, so that the
// next launch and the next scheduling pass avoid them instead of asking EC2
// again for what it just refused.
//
// Entries expire on their own: capacity comes back, and a type marked out
// forever would be a type never tried again.
//
// An entry may hold for one placement group only: EC2 refusing a type in a
// group (a cluster group's rack full, a spread group's seven instances per
// zone) says nothing of the same type outside it.
package unavailable

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long an offering stays out after EC2 refused it. Three
// minutes is Karpenter's figure: long enough that the next batch of pending
// pods, seconds later, goes elsewhere; short enough that a pool whose
// cheapest type was briefly short gets it again within minutes.
const DefaultTTL = 3 * time.Minute

// key is an offering; group is the placement group the entry holds for,
// "" for every launch.
type key struct{ instanceType, zone, capacityType, group string }

type entry struct {
	expires time.Time
	reason  string
}

// Cache holds the unavailable offerings. The zero value is not usable; use New.
type Cache struct {
	clk clock.Clock
	ttl time.Duration
	log logr.Logger

	mu      sync.Mutex
	entries map[key]entry
	seq     uint64
}

// New returns an empty cache whose entries last ttl on clk (DefaultTTL when
// ttl is not positive).
func New(clk clock.Clock, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Cache{clk: clk, ttl: ttl, entries: map[key]entry{}}
}

// WithLog makes the cache say when an offering goes out and when it is
// offered again, so an operator can tell why a cheaper type was skipped and
// when it came back. Call it before the cache is shared.
func (c *Cache) WithLog(l logr.Logger) *Cache {
	c.log = l
	return c
}

// MarkUnavailable takes the offering out for the TTL from now. Marking an
// offering that is already out restarts its TTL: EC2 has just refused it
// again.
func (c *Cache) MarkUnavailable(instanceType, zone, capacityType, reason string) {
	c.MarkUnavailableIn("", instanceType, zone, capacityType, reason)
}

// MarkUnavailableIn takes the offering out for launches into the placement
// group alone (every launch when group is "").
func (c *Cache) MarkUnavailableIn(group, instanceType, zone, capacityType, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	k := key{instanceType, zone, capacityType, group}
	if _, ok := c.entries[k]; !ok {
		c.seq++
		kv := []any{"instance-type", instanceType, "zone", zone, "capacity-type", capacityType, "reason", reason, "ttl", c.ttl.String()}
		if group != "" {
			kv = append(kv, "placement-group-id", group)
		}
		c.log.Info("offering unavailable", kv...)
	}
	c.entries[k] = entry{expires: c.clk.Now().Add(c.ttl), reason: reason}
}

// anyOffering stands for every instance type and zone in a key that marks
// a whole capacity type out.
const anyOffering = "*"

// MarkCapacityTypeUnavailable takes every offering of a capacity type out
// for the TTL: EC2 refused the capacity type itself (spot without its
// service-linked role), so each type and zone would be refused alike.
func (c *Cache) MarkCapacityTypeUnavailable(capacityType, reason string) {
	c.MarkUnavailable(anyOffering, anyOffering, capacityType, reason)
}

// IsUnavailable reports whether the offering is out, by itself or with its
// whole capacity type.
func (c *Cache) IsUnavailable(instanceType, zone, capacityType string) bool {
	return c.IsUnavailableIn("", instanceType, zone, capacityType)
}

// IsUnavailableIn reports whether the offering is out for a launch into the
// placement group ("" for none): out for every launch, or for that group.
func (c *Cache) IsUnavailableIn(group, instanceType, zone, capacityType string) bool {
	_, ok := c.find(group, instanceType, zone, capacityType)
	return ok
}

// Reason is why the offering is out, or "" when it is not.
func (c *Cache) Reason(instanceType, zone, capacityType string) string {
	e, _ := c.find("", instanceType, zone, capacityType)
	return e.reason
}

// find is the entry that takes the offering out for a launch into the
// group: the offering's own, its capacity type's, or the group's.
func (c *Cache) find(group, instanceType, zone, capacityType string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	keys := []key{{instanceType, zone, capacityType, ""}, {anyOffering, anyOffering, capacityType, ""}}
	if group != "" {
		keys = append(keys, key{instanceType, zone, capacityType, group})
	}
	for _, k := range keys {
		if e, ok := c.entries[k]; ok {
			return e, true
		}
	}
	return entry{}, false
}

// SeqNum changes whenever the set of unavailable offerings changes (an entry
// added or expired), so a cache of computed offerings can key on it and
// recompute exactly when availability moved. Restarting an entry's TTL does
// not change it: the set is the same.
func (c *Cache) SeqNum() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return c.seq
}

// expireLocked drops the entries whose TTL has passed. Expiry is checked on
// every read instead of by a timer, so a caller that reads after the clock
// moved always sees the expiry, with no goroutine to stop. The log line of
// an expiry comes with that first read (Joiner's disruption loop reads every
// few seconds).
func (c *Cache) expireLocked() {
	now := c.clk.Now()
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			c.seq++
			kv := []any{"instance-type", k.instanceType, "zone", k.zone, "capacity-type", k.capacityType, "reason", e.reason}
			if k.group != "" {
				kv = append(kv, "placement-group-id", k.group)
			}
			c.log.Info("offering available again", kv...)
		}
	}
}
