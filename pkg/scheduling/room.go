package scheduling

import (
	"fmt"
	"slices"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Limited offerings (Offering.Room) are a commitment's room: an RI's
// unused instances at no price, a Savings Plan's unused dollars at its
// rate. The search prices nodes with one price per offering, so it is not
// asked to count them. Solve plans twice instead, once with the limited
// offerings hidden (list prices) and once with them shown as if without
// end, and in each plan hands the room out afterwards (withinLimits): a
// node that gets none is priced at its type's best unlimited offering. It
// keeps the cheaper plan. The first finds the commitments of the types
// a list-price plan uses; the second the commitments of types it would
// not have chosen.

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
						cp = it.Copy()
						cp.Offerings = nil
						for _, o := range it.Offerings {
							if !o.Limited() {
								cp.Offerings = append(cp.Offerings, o)
							}
						}
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

// solveCommitted plans with the commitments' offerings shown, hands out
// their room, and plans the pods of the NodeClaims that got none again at
// list prices, beside the ones that did (as nodes being launched, which
// count for topology and the pools' limits): the first pass alone would
// put every pod on the commitment's type as if its room had no end.
func solveCommitted(snap Snapshot, opts Options) *Plan {
	a := solveOnce(snap, opts)
	// Only the NodeClaims planned at a room's price need planning again
	// when they get none: the others were priced at list already.
	atRoomPrice := map[*NewNodeClaim]bool{}
	for _, nc := range a.NewNodeClaims {
		atRoomPrice[nc] = nc.Offering.Limited()
	}
	withinLimits(a.NewNodeClaims)
	var kept []*NewNodeClaim
	var rest []*corev1.Pod
	for _, nc := range a.NewNodeClaims {
		if nc.Offering.Limited() || !atRoomPrice[nc] {
			kept = append(kept, nc)
		} else {
			rest = append(rest, nc.Pods...)
		}
	}
	if len(kept) == 0 || len(rest) == 0 {
		return a
	}
	sub, originals := withoutLimited(snap)
	sub.Pods = rest
	sub.Nodes = slices.Clone(snap.Nodes)
	byName := map[string]*NewNodeClaim{}
	inUse := map[string]resources.Resources{}
	for i, nc := range kept {
		name := fmt.Sprintf("committed-%d", i)
		byName[name] = nc
		labels := nc.Requirements.Labels()
		for k, v := range nc.InstanceType.Labels {
			labels[k] = v
		}
		labels[corev1.LabelHostname] = name
		sub.Nodes = append(sub.Nodes, &Node{Name: name, Labels: labels, Allocatable: nc.InstanceType.Allocatable, Pods: nc.Pods,
			NodePool: nc.NodePool, InFlight: true, AttachLimits: nc.InstanceType.AttachLimits})
		// Against a spend cap, a NodeClaim in a commitment's room counts
		// the room's price: what the bill will charge for it.
		use := resources.FromResourceList(nc.InstanceType.Capacity).With(spendcap.Resource, spendcap.Micro(nc.Offering.Price))
		inUse[nc.NodePool] = inUse[nc.NodePool].Add(use)
	}
	for i := range sub.NodePools {
		p := &sub.NodePools[i]
		if add, ok := inUse[p.NodePool.Name]; ok {
			use := resources.FromResourceList(p.InUse).Add(add).ResourceList()
			if n, ok := p.InUse["nodes"]; ok {
				n = n.DeepCopy()
				n.Add(*resource.NewQuantity(int64(countIn(kept, p.NodePool.Name)), resource.DecimalSI))
				use["nodes"] = n
			}
			p.InUse = use
		}
	}
	b := solveOnce(sub, opts)
	restore(b.NewNodeClaims, originals)
	// Pods b placed on a kept NodeClaim join it; other existing nodes
	// keep theirs.
	existing := map[string]string{}
	for key, node := range a.Existing {
		existing[key] = node
	}
	for _, pod := range rest {
		key := pod.Namespace + "/" + pod.Name
		node, ok := b.Existing[key]
		if !ok {
			continue
		}
		if nc := byName[node]; nc != nil {
			nc.Pods = append(nc.Pods, pod)
			nc.Requests = nc.Requests.Add(resources.PodRequests(pod))
			continue
		}
		existing[key] = node
	}
	// The room is handed out again over both: what the first pass kept
	// (pinned to on-demand, so first in line) and what the second
	// planned, which may take what is left.
	all := append(kept, b.NewNodeClaims...)
	withinLimits(all)
	return &Plan{NewNodeClaims: all, Existing: existing,
		Unschedulable: append(slices.Clone(a.Unschedulable), b.Unschedulable...)}
}

func countIn(ncs []*NewNodeClaim, pool string) int {
	n := 0
	for _, nc := range ncs {
		if nc.NodePool == pool {
			n++
		}
	}
	return n
}
