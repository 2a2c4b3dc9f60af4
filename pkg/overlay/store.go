package overlay

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// Store holds the overlays the NodeOverlay controller last evaluated, for
// every reader of instance types. It is swapped whole, so a plan never
// sees half of an evaluation.
type Store struct {
	v atomic.Pointer[evaluation]
}

type evaluation struct {
	overlays []*Overlay
	// pools are the NodePools the overlays were checked against, with the
	// labels they had then.
	pools map[string]Pool
}

// Set records an evaluation of overlays (in precedence order) over pools.
func (s *Store) Set(overlays []*Overlay, pools []Pool) {
	e := &evaluation{overlays: overlays, pools: make(map[string]Pool, len(pools))}
	for _, p := range pools {
		e.pools[p.Name] = p
	}
	s.v.Store(e)
}

// AwaitingEvaluationError says a NodePool is newer, or its labels are, than
// the last evaluation: its types cannot be priced yet. It passes as soon
// as the controller has looked, within the second or so a reconcile takes.
type AwaitingEvaluationError struct{ NodePool string }

func (e *AwaitingEvaluationError) Error() string {
	return fmt.Sprintf("nodepool %q is awaiting evaluation", e.NodePool)
}

// ApplyTo returns a pool's types as the overlays make them, or an
// AwaitingEvaluationError: planning with list prices in the meantime could
// launch what the overlays rule out.
func (s *Store) ApplyTo(p Pool, types []*cloudprovider.InstanceType) ([]*cloudprovider.InstanceType, error) {
	e := s.v.Load()
	if e == nil {
		return nil, &AwaitingEvaluationError{NodePool: p.Name}
	}
	if seen, ok := e.pools[p.Name]; !ok || !maps.Equal(seen.Labels, p.Labels) {
		return nil, &AwaitingEvaluationError{NodePool: p.Name}
	}
	return Apply(p, types, e.overlays), nil
}

// ApplyToNamed is ApplyTo for a pool known by name only (a NodeClaim's
// karpenter.sh/nodepool label), with the labels it had when evaluated. A
// pool the evaluation did not see gets its types as they are: a launch
// already planned is not held back.
func (s *Store) ApplyToNamed(pool string, types []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	e := s.v.Load()
	if e == nil {
		return types
	}
	p, ok := e.pools[pool]
	if !ok {
		return types
	}
	return Apply(p, types, e.overlays)
}

// Decorate makes a provider whose InstanceTypes are overlaid from the
// store, so provisioning, consolidation, drift replacements and the
// metrics all see the same prices and capacity. Create is the provider's
// own: the providers overlay the types they launch from themselves
// (their Overlay option), since only they know which they choose.
func Decorate(cp cloudprovider.CloudProvider, s *Store) cloudprovider.CloudProvider {
	return &decorated{CloudProvider: cp, store: s}
}

type decorated struct {
	cloudprovider.CloudProvider
	store *Store
}

func (d *decorated) InstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, err := d.CloudProvider.InstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	return d.store.ApplyTo(PoolOf(np), its)
}

// Bill passes the wrapped provider's through (Biller): with the
// NodeOverlay gate on, consolidation, the cost metrics and the spend caps
// see the commitments through this wrapper.
func (d *decorated) Bill(ctx context.Context) (cloudprovider.Bill, error) {
	if b, ok := d.CloudProvider.(cloudprovider.Biller); ok {
		return b.Bill(ctx)
	}
	return cloudprovider.Bill{}, nil
}
