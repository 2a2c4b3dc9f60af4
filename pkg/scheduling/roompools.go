package scheduling

import (
	"errors"
	"math"
	"sort"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Commitment pools plan a commitment's room in the same pass as
// everything else. Each NodePool with limited offerings (room.go) is
// planned as several pools of the same name, weight and account (its
// usage and limits are one): first one per commitment with room, whose
// types are the room's offerings alone, cheapest room first, and whose
// own limit is the room left (roomResource, which every pool's nodes
// share); then the NodePool at list prices. Pods go to the first pool
// that has room for them, as they go to the heaviest NodePool: the
// commitment is filled first, and where its limit stops a pool the pods
// left go on to the next, as with spec.limits. A type joins a
// commitment's pool only where the room is cheaper than anything else the
// NodePool may launch it as, so a plan rate above a type's spot price
// does not draw pods off spot.

// roomResourcePrefix names the resource a commitment's room is counted
// in, in millionths of its units, on the types of a commitment pool.
const roomResourcePrefix = "room.joiner.sh/"

func roomResource(id string) corev1.ResourceName {
	return corev1.ResourceName(roomResourcePrefix + id)
}

func isRoomResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), roomResourcePrefix)
}

// roomUnits is a room's units as the planner counts them, millionths.
func roomUnits(units float64) int64 { return int64(math.Round(units * 1e6)) }

// roomPool marks a snapshot NodePool as one commitment's pool.
type roomPool struct {
	id   string
	left float64
}

// withRoomPools is snap with each NodePool that has limited offerings
// split into commitment pools and the NodePool at list prices, and the
// copied types to their originals, for restore.
func withRoomPools(snap Snapshot) (Snapshot, map[*cloudprovider.InstanceType]*cloudprovider.InstanceType) {
	listed, originals := withoutLimited(snap)
	var pools []NodePool
	for i, p := range snap.NodePools {
		pools = append(pools, roomPools(p, originals)...)
		pools = append(pools, listed.NodePools[i])
	}
	listed.NodePools = pools
	return listed, originals
}

// roomPools are p's commitment pools, cheapest room (against list) first;
// the types they copy are added to originals.
func roomPools(p NodePool, originals map[*cloudprovider.InstanceType]*cloudprovider.InstanceType) []NodePool {
	reqs, err := requirements.FromNodeSelectorRequirements(p.NodePool.Spec.Template.Spec.Requirements...)
	if err != nil {
		return nil
	}
	zoneReq, ctReq := reqs[corev1.LabelTopologyZone], reqs[v1.LabelCapacityType]
	allowed := func(o cloudprovider.Offering) bool {
		return o.Available && (zoneReq == nil || zoneReq.Has(o.Zone)) && (ctReq == nil || ctReq.Has(o.CapacityType))
	}
	type room struct {
		pool  NodePool
		ratio float64
	}
	byID := map[string]*room{}
	var order []string
	for _, it := range p.InstanceTypes {
		unlimited, ok := it.CheapestOffering(func(o cloudprovider.Offering) bool { return !o.Limited() && allowed(o) })
		var offerings = map[string][]cloudprovider.Offering{}
		for _, o := range it.Offerings {
			if o.Limited() && allowed(o) && (!ok || o.Price < unlimited.Price) {
				offerings[o.Room.ID] = append(offerings[o.Room.ID], o)
			}
		}
		for id, os := range offerings {
			r := byID[id]
			if r == nil {
				r = &room{pool: NodePool{NodePool: p.NodePool, InUse: p.InUse, room: &roomPool{id: id}}, ratio: math.Inf(1)}
				byID[id] = r
				order = append(order, id)
			}
			cp := it.WithOfferings(os)
			originals[cp] = it
			r.pool.InstanceTypes = append(r.pool.InstanceTypes, cp)
			for _, o := range os {
				r.pool.room.left = max(r.pool.room.left, o.Room.Left)
				if ok && unlimited.Price > 0 {
					r.ratio = min(r.ratio, o.Price/unlimited.Price)
				}
			}
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if byID[order[i]].ratio != byID[order[j]].ratio {
			return byID[order[i]].ratio < byID[order[j]].ratio
		}
		return order[i] < order[j]
	})
	out := make([]NodePool, len(order))
	for i, id := range order {
		out[i] = byID[id].pool
	}
	return out
}

// roomTakes is what one node of it takes of room id, in roomUnits.
func roomTakes(it *cloudprovider.InstanceType, id string) int64 {
	takes := 0.0
	for _, o := range it.Offerings {
		if o.Room.ID == id {
			takes = max(takes, o.Room.Takes)
		}
	}
	return roomUnits(takes)
}

// roomPool makes p the pool of room r: its limits gain the room left, and
// its nodes' use of the room is counted with every pool's.
func (s *solver) roomPool(p *pool, r *roomPool) {
	limits := corev1.ResourceList{}
	for k, v := range p.limits {
		limits[k] = v
	}
	limits[roomResource(r.id)] = *resource.NewQuantity(roomUnits(r.left), resource.DecimalSI)
	p.limits = limits
	p.room = r.id
	if s.rooms == nil {
		s.rooms = &resources.Resources{}
	}
	p.rooms = s.rooms
}

// withoutRooms is r without the commitments' rooms, for messages: the
// rooms are the planner's own bookkeeping.
func withoutRooms(r resources.Resources) resources.Resources {
	for name := range r.Ext {
		if isRoomResource(name) {
			ext := map[corev1.ResourceName]int64{}
			for k, v := range r.Ext {
				if !isRoomResource(k) {
					ext[k] = v
				}
			}
			r.Ext = ext
			return r
		}
	}
	return r
}

// topUp fills what is left of a commitment pool's room once its limit
// stopped the rounding: the rounding opens the LP's patterns, often of the
// largest type, and stops at the first that does not fit, where a smaller
// type of the room would. Nodes of whichever type fits the room left
// (openIn) take the groups' pods, until none fits. The rest go on to the
// next pool.
func (s *solver) topUp(p *pool, groups []*podGroup) {
	for _, g := range groups {
		for g.remaining > 0 {
			n, err := s.openIn(p, g, g.variants[0])
			if err != nil {
				break
			}
			for _, h := range groups {
				for h.remaining > 0 && h.requests.Add(n.used).Fits(n.capacity) && s.check(h, h.variants[0], n) == nil {
					s.commit(h, h.variants[0], n, h.pods[len(h.pods)-h.remaining])
				}
			}
		}
	}
}

// errRoomUsedUp says a commitment pool's room cannot hold another node.
var errRoomUsedUp = errors.New("the commitment's room is used up")

// roomUsedUp reports whether a commitment pool's room is too small for
// any of its types: the greedy pass asks it of every pod it opens a node
// for, and would otherwise weigh every type before the limits turn each
// down.
func (p *pool) roomUsedUp() bool {
	if p.room == "" {
		return false
	}
	limit := p.limits[roomResource(p.room)]
	return limit.Value()-p.rooms.Of(roomResource(p.room)) < p.fewest
}
