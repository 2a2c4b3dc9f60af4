// Package zonalshift follows the ARC zonal shifts of the cluster
// (ENABLE_ZONAL_SHIFT). While a shift away from a zone is applied and has
// not expired, that zone offers no capacity: no launch goes there, neither
// for pending pods nor for consolidation's replacements, and pods already
// there are left alone. When the shift ends the zone comes back. ARC names
// zones by ID (use1-az1), which the providers map to the zones EC2NodeClass
// subnets are in.
//
// The shifts are read with arc-zonal-shift:GetManagedResource on the
// cluster's ARN, the one call the guides' ZonalShiftPolicy grants, every
// Interval by the leader, and once at start, which also checks that ARC
// manages the cluster.
package zonalshift

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// API is the ARC call the provider makes.
type API interface {
	GetManagedResource(ctx context.Context, in *arczonalshift.GetManagedResourceInput, opts ...func(*arczonalshift.Options)) (*arczonalshift.GetManagedResourceOutput, error)
}

// DefaultInterval is how often the shifts are read: a shift is what an
// operator starts when a zone is impaired, and every launch into it until
// then may fail.
const DefaultInterval = 30 * time.Second

// Provider knows the cluster's shifts.
type Provider struct {
	API        API
	ClusterARN string
	Clock      clock.WithTicker
	Interval   time.Duration
	Log        logr.Logger
	// OnChange, when set, is called with the shifted zone IDs before and
	// after each change, from the refresh loop.
	OnChange func(ctx context.Context, before, after map[string]bool)

	mu     sync.RWMutex
	shifts map[string]time.Time // zone ID → expiry of the applied shift
	last   map[string]bool
}

// Update reads the managed resource's shifts. Only applied shifts count:
// ARC may hold one that is not in effect (a practice run blocked by its
// alarms, say).
func (p *Provider) Update(ctx context.Context) error {
	out, err := p.API.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(p.ClusterARN)})
	if err != nil {
		return fmt.Errorf("getting zonal shifts of %s: %w", p.ClusterARN, err)
	}
	shifts := map[string]time.Time{}
	for _, s := range out.ZonalShifts {
		if s.AppliedStatus != arctypes.AppliedStatusApplied || s.AwayFrom == nil || s.ExpiryTime == nil {
			continue
		}
		shifts[*s.AwayFrom] = *s.ExpiryTime
	}
	p.mu.Lock()
	p.shifts = shifts
	p.mu.Unlock()
	p.Log.V(1).Info("updated zonal shifts", "shifts", len(shifts))
	return nil
}

// Shifted are the zone IDs traffic is shifted away from now.
func (p *Provider) Shifted() map[string]bool {
	now := p.Clock.Now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := map[string]bool{}
	for id, expiry := range p.shifts {
		if now.Before(expiry) {
			out[id] = true
		}
	}
	return out
}

// NeedLeaderElection: the leader plans, so the leader reads.
func (p *Provider) NeedLeaderElection() bool { return true }

// Start reads the shifts every Interval until ctx ends. A failed read
// keeps the last shifts: a shift does not end because ARC could not be
// asked, and expired ones stop counting on their own.
func (p *Provider) Start(ctx context.Context) error {
	interval := p.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	t := p.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.Update(ctx); err != nil {
			p.Log.Error(err, "updating zonal shifts")
		}
		p.notify(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (p *Provider) notify(ctx context.Context) {
	now := p.Shifted()
	if maps.Equal(now, p.last) {
		return
	}
	before := p.last
	p.last = now
	ids := make([]string, 0, len(now))
	for id := range now {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p.Log.Info("zonal shifts changed", "shifted-zone-ids", ids)
	if p.OnChange != nil {
		p.OnChange(ctx, before, now)
	}
}
