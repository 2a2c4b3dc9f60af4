package overlay

import (
	"cmp"
	"slices"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	corev1 "k8s.io/api/core/v1"
)

// Pool is what an overlay sees of a NodePool besides its types: its name
// (the karpenter.sh/nodepool label) and its template's labels, which every
// node of the pool carries.
type Pool struct {
	Name   string
	Labels map[string]string
}

// PoolOf is the Pool of a NodePool.
func PoolOf(np *v1.NodePool) Pool {
	return Pool{Name: np.Name, Labels: np.Spec.Template.Labels}
}

// Sort orders overlays as they take precedence: weight, then name, both
// descending.
func Sort(overlays []*Overlay) {
	slices.SortStableFunc(overlays, func(a, b *Overlay) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
}

// label is the value of key on a node of type it in pool p launched as
// offering o, and whether it has the label at all.
func label(key string, p Pool, it *cloudprovider.InstanceType, o cloudprovider.Offering) (string, bool) {
	switch key {
	case corev1.LabelTopologyZone:
		return o.Zone, true
	case v1.LabelCapacityType:
		return o.CapacityType, true
	case v1.LabelNodePool:
		return p.Name, true
	}
	if v, ok := it.Labels[key]; ok {
		return v, true
	}
	v, ok := p.Labels[key]
	return v, ok
}

// Selects reports whether the overlay applies to offering o of type it in
// pool p. A requirement on a label the node would not carry is met only by
// NotIn and DoesNotExist, as in node affinity.
func (ov *Overlay) Selects(p Pool, it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
	for key, r := range ov.reqs {
		v, ok := label(key, p, it, o)
		if !ok {
			if !r.AbsentOK() {
				return false
			}
			continue
		}
		if !r.Has(v) {
			return false
		}
	}
	return true
}

// selectsType reports whether the overlay selects any offering of it.
func (ov *Overlay) selectsType(p Pool, it *cloudprovider.InstanceType) bool {
	for _, o := range it.Offerings {
		if ov.Selects(p, it, o) {
			return true
		}
	}
	return false
}

// Conflicts returns the names of the overlays (sorted by Sort) that set
// what an overlay of the same weight ahead of them already set, in any
// pool: one offering's price, or one capacity resource of a type. A tie
// under a weightier overlay is a conflict too, so that an overlay's status
// does not change when another is deleted. A conflicting overlay claims
// nothing, so it never makes a third one conflict.
func Conflicts(overlays []*Overlay, pools []Pool, typesByPool map[string][]*cloudprovider.InstanceType) map[string]bool {
	type offeringKey struct{ pool, typ, zone, capacityType string }
	type resourceKey struct {
		pool, typ string
		name      corev1.ResourceName
	}
	priceBy := map[offeringKey]int32{}
	capacityBy := map[resourceKey]int32{}
	out := map[string]bool{}
	for _, ov := range overlays {
		var prices []offeringKey
		var capacity []resourceKey
		conflict := false
		for _, p := range pools {
			for _, it := range typesByPool[p.Name] {
				any := false
				for _, o := range it.Offerings {
					if !ov.Selects(p, it, o) {
						continue
					}
					any = true
					if ov.SetsPrice() {
						k := offeringKey{p.Name, it.Name, o.Zone, o.CapacityType}
						if w, ok := priceBy[k]; ok && w == ov.Weight {
							conflict = true
						}
						prices = append(prices, k)
					}
				}
				if !any {
					continue
				}
				for name := range ov.Capacity {
					k := resourceKey{p.Name, it.Name, name}
					if w, ok := capacityBy[k]; ok && w == ov.Weight {
						conflict = true
					}
					capacity = append(capacity, k)
				}
			}
		}
		if conflict {
			out[ov.Name] = true
			continue
		}
		// Overlays come weightiest first, so the last claim of a key is the
		// lightest: the one a later overlay of equal weight would tie with.
		for _, k := range prices {
			priceBy[k] = ov.Weight
		}
		for _, k := range capacity {
			capacityBy[k] = ov.Weight
		}
	}
	return out
}

// Apply returns the pool's types as the overlays (sorted by Sort, without
// the conflicting ones) make them: each offering priced by the first
// overlay that selects it and sets a price, each capacity resource set by
// the first overlay that selects some offering of the type and names it.
// A type no overlay changes is returned as it was, and the input is never
// changed.
func Apply(p Pool, types []*cloudprovider.InstanceType, overlays []*Overlay) []*cloudprovider.InstanceType {
	if len(overlays) == 0 {
		return types
	}
	out := make([]*cloudprovider.InstanceType, len(types))
	for i, it := range types {
		out[i] = applyType(p, it, overlays)
	}
	return out
}

func applyType(p Pool, it *cloudprovider.InstanceType, overlays []*Overlay) *cloudprovider.InstanceType {
	var cp *cloudprovider.InstanceType
	copied := func() *cloudprovider.InstanceType {
		if cp == nil {
			cp = it.Copy()
		}
		return cp
	}
	for i, o := range it.Offerings {
		for _, ov := range overlays {
			if !ov.SetsPrice() || !ov.Selects(p, it, o) {
				continue
			}
			c := copied()
			if !c.PriceOverlaid {
				c.Offerings = slices.Clone(it.Offerings)
				c.PriceOverlaid = true
			}
			c.Offerings[i].Price = ov.Price(o.Price)
			break
		}
	}
	set := map[corev1.ResourceName]bool{}
	for _, ov := range overlays {
		if len(ov.Capacity) == 0 || !ov.selectsType(p, it) {
			continue
		}
		for name, q := range ov.Capacity {
			if set[name] {
				continue
			}
			set[name] = true
			c := copied()
			if !c.CapacityOverlaid {
				c.Capacity, c.Allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
				c.CapacityOverlaid = true
			}
			addCapacity(c, name, q)
		}
	}
	if cp == nil {
		return it
	}
	return cp
}
