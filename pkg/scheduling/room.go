package scheduling

import (
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// Limited offerings (Offering.Room) are a commitment's room: an RI's
// unused instances at no price, a Savings Plan's unused dollars at its
// rate. Solve plans twice, beside each other: once with the limited
// offerings hidden (list prices), and once with each commitment's room as
// a pool of its own, limited to the room (roompools.go). In each plan the
// room is then handed out again as the bill will apply it (withinLimits):
// a node that gets none is priced at its type's best unlimited offering.
// It keeps the cheaper plan.

// hasLimits reports whether any pool offers a limited offering.
func hasLimits(snap Snapshot) bool {
	for _, p := range snap.NodePools {
		for _, it := range p.InstanceTypes {
			for _, o := range it.Offerings {
				if o.Limited() {
					return true
				}
			}
		}
	}
	return false
}

// withoutLimited is snap with the limited offerings taken out, and the
// types it copied to take them out, to the originals: a plan of it gets
// its types back (restore) before the rooms are handed out.
func withoutLimited(snap Snapshot) (Snapshot, map[*cloudprovider.InstanceType]*cloudprovider.InstanceType) {
	copied := map[*cloudprovider.InstanceType]*cloudprovider.InstanceType{}
	pools := make([]NodePool, len(snap.NodePools))
	for i, p := range snap.NodePools {
		pools[i] = p
		pools[i].InstanceTypes = make([]*cloudprovider.InstanceType, len(p.InstanceTypes))
		for j, it := range p.InstanceTypes {
			cp, ok := copied[it]
			if !ok {
				cp = it
				for _, o := range it.Offerings {
					if o.Limited() {
						var unlimited []cloudprovider.Offering
						for _, o := range it.Offerings {
							if !o.Limited() {
								unlimited = append(unlimited, o)
							}
						}
						cp = it.WithOfferings(unlimited)
						break
					}
				}
				copied[it] = cp
			}
			pools[i].InstanceTypes[j] = cp
		}
	}
	snap.NodePools = pools
	originals := map[*cloudprovider.InstanceType]*cloudprovider.InstanceType{}
	for orig, cp := range copied {
		originals[cp] = orig
	}
	return snap, originals
}

// restore gives the plan's NodeClaims the types withoutLimited copied
// theirs from, which carry the rooms.
func restore(ncs []*NewNodeClaim, originals map[*cloudprovider.InstanceType]*cloudprovider.InstanceType) {
	for _, nc := range ncs {
		if o, ok := originals[nc.InstanceType]; ok {
			nc.InstanceType = o
		}
		types := make([]*cloudprovider.InstanceType, len(nc.InstanceTypes))
		for i, it := range nc.InstanceTypes {
			types[i] = it
			if o, ok := originals[it]; ok {
				types[i] = o
			}
		}
		nc.InstanceTypes = types
	}
}

// withinLimits hands each commitment's room to the plan's new NodeClaims,
// a whole node at a time while the room lasts (the fraction of a node a
// commitment has left is not planned on), those whose best unlimited
// offering costs most first, and prices the others at their type's best
// unlimited offering. A NodeClaim given room is pinned to it: its type, zone and
// capacity type, so that the launch takes what was priced.
func withinLimits(ncs []*NewNodeClaim) {
	room := map[string]float64{}
	for _, nc := range ncs {
		for _, o := range nc.InstanceType.Offerings {
			if o.Limited() && o.Available {
				room[o.Room.ID] = max(room[o.Room.ID], o.Room.Left)
			}
		}
	}
	if len(room) == 0 {
		return
	}
	type claim struct {
		nc        *NewNodeClaim
		accept    func(cloudprovider.Offering) bool
		unlimited cloudprovider.Offering
		found     bool
	}
	claims := make([]claim, len(ncs))
	for i, nc := range ncs {
		accept := offeringFilter(nc.Requirements[corev1.LabelTopologyZone], nc.Requirements[v1.LabelCapacityType])
		off, found := nc.InstanceType.CheapestOffering(func(o cloudprovider.Offering) bool { return !o.Limited() && accept(o) })
		claims[i] = claim{nc: nc, accept: accept, unlimited: off, found: found}
	}
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].unlimited.Price > claims[j].unlimited.Price })
	for _, c := range claims {
		best, ok := c.nc.InstanceType.CheapestOffering(func(o cloudprovider.Offering) bool {
			return o.Limited() && c.accept(o) && room[o.Room.ID] >= o.Room.Takes-1e-9 && (!c.found || o.Price < c.unlimited.Price)
		})
		switch {
		case ok:
			room[best.Room.ID] -= best.Room.Takes
			pin(c.nc, best)
		case c.found:
			c.nc.Offering = c.unlimited
		}
	}
}

// pin narrows nc to its type in the offering's zone and capacity type.
func pin(nc *NewNodeClaim, o cloudprovider.Offering) {
	nc.Offering = o
	nc.InstanceTypes = []*cloudprovider.InstanceType{nc.InstanceType}
	nc.Requirements = nc.Requirements.Copy()
	for key, value := range map[string]string{corev1.LabelInstanceTypeStable: nc.InstanceType.Name, corev1.LabelTopologyZone: o.Zone, v1.LabelCapacityType: o.CapacityType} {
		if r, err := requirements.NewRequirement(key, corev1.NodeSelectorOpIn, value); err == nil {
			nc.Requirements.Add(r)
		}
	}
}
