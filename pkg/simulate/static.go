package simulate

import (
	"fmt"
	"slices"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A static NodePool (spec.replicas, under the StaticCapacity feature gate)
// keeps its count of nodes whatever the pods need, as the controller's
// static provisioning keeps it: plans leave it out (Snapshot.Static),
// consolidation leaves its nodes alone, and drift replaces them one for
// one (disruption.StaticDrift, through Decide).

// isStatic reports whether pool is a static NodePool.
func (s *sim) isStatic(pool string) bool {
	np := s.pools[pool]
	return np != nil && np.Spec.Replicas != nil
}

// reconcileStatic brings each static NodePool to its replicas, as the
// controller's static provisioning does on every NodeClaim change: nodes
// that are neither deleting nor being disrupted count, and so do those
// being disrupted, whose replacements are on their way; a shortfall is
// launched (scheduling.StaticNodeClaim, within limits.nodes), and a
// surplus goes in disruption.ScaleDown's order.
func (s *sim) reconcileStatic() {
	var live []*simNode
	for _, name := range sortedKeys(s.pools) {
		np := s.pools[name]
		if np.Spec.Replicas == nil {
			continue
		}
		if live == nil {
			live = s.liveNodes()
		}
		var active []*simNode
		var deleting, disrupting int64
		for _, n := range live {
			switch {
			case n.pool != name:
			case n.deleting:
				deleting++
			case n.underway != nil:
				disrupting++
			default:
				active = append(active, n)
			}
		}
		replicas, running := *np.Spec.Replicas, int64(len(active))
		switch {
		case running+disrupting < replicas:
			want := replicas - running - disrupting
			if q, ok := np.Spec.Limits[v1.ResourceNodes]; ok {
				want = min(want, max(q.Value()-running-disrupting-deleting, 0))
			}
			if want == 0 {
				continue
			}
			nc, err := scheduling.StaticNodeClaim(scheduling.NodePool{NodePool: np, InstanceTypes: s.staticTypes(name)}, s.daemonSets, s.cfg.Scheduling)
			if err != nil {
				s.problem(fmt.Sprintf("static NodePool %s launches nothing: no node can be planned: %v", name, err))
				continue
			}
			for range want {
				cp := *nc
				s.launch(&cp, "static")
			}
		case running > replicas:
			claims := make([]*v1.NodeClaim, len(active))
			byName := map[string]*simNode{}
			podsByNode := map[string][]*corev1.Pod{}
			for i, n := range active {
				claims[i] = s.nodeClaimOf(n)
				byName[n.name] = n
				for _, key := range sortedKeys(n.pods) {
					podsByNode[n.name] = append(podsByNode[n.name], n.pods[key].pod)
				}
			}
			for _, nc := range disruption.ScaleDown(claims, podsByNode, int(running-replicas), s.now) {
				s.rec.disrupted("scaled down")
				s.drain(byName[nc.Name], "scaled down")
			}
		}
	}
}

// staticTypes are a static pool's types as its plans see them: with the
// commitments' room left, when the run has commitments.
func (s *sim) staticTypes(pool string) []*cloudprovider.InstanceType {
	if s.cfg.Commitments == nil {
		return s.typesFor(pool)
	}
	for _, p := range s.snapshot(nil).Static {
		if p.NodePool.Name == pool {
			return p.InstanceTypes
		}
	}
	return s.typesFor(pool)
}

// nodeClaimOf is n's NodeClaim as ScaleDown reads it: its name, age,
// node, instance and expiry.
func (s *sim) nodeClaimOf(n *simNode) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n.name, CreationTimestamp: metav1.NewTime(n.launched)},
		Status: v1.NodeClaimStatus{NodeName: n.name, ProviderID: "simulated:///" + n.name}}
	nc.Spec.ExpireAfter = s.pools[n.pool].Spec.Template.Spec.ExpireAfter
	return nc
}

// staticFloor is what the static NodePools' nodes that are to stay cost,
// $/h: the bound counts them whatever the pods need, since nothing
// removes them, and they run on the cheapest offering their pools allow.
// Nodes deleting or being replaced are left out: the bound is held until
// the next sample, and they may be gone before it.
func (s *sim) staticFloor() float64 {
	total := 0.0
	for _, n := range s.liveNodes() {
		if s.isStatic(n.pool) && !n.deleting && n.underway == nil {
			total += n.offering.Price
		}
	}
	return total
}

// freeTypes are its with every offering at no price: a static pool's
// room, as the bound sees it, costs the pods nothing more.
func freeTypes(its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		offers := make([]cloudprovider.Offering, len(it.Offerings))
		for j, o := range it.Offerings {
			o.Price = 0
			offers[j] = o
		}
		out[i] = it.WithOfferings(offers)
	}
	return out
}

// freeStatic is the static pool's types at no price, worked out once per
// types.
func (s *sim) freeStatic(pool string) []*cloudprovider.InstanceType {
	if s.free == nil {
		s.free = map[string][]*cloudprovider.InstanceType{}
	}
	if _, ok := s.free[pool]; !ok {
		s.free[pool] = freeTypes(s.poolTypes[pool])
	}
	return s.free[pool]
}

// checkApplies refuses what a trace applies that the controller would
// not take: a NodePool switched between static and dynamic in place (the
// CRD's rule), or made static without the gate.
func (s *sim) checkApplies(trace *Trace) error {
	static := map[string]bool{}
	for name := range s.pools {
		static[name] = s.isStatic(name)
	}
	for i, e := range trace.Events {
		if e.Apply == "" {
			continue
		}
		objs, err := manifests.Parse("apply", strings.NewReader(e.Apply))
		if err != nil {
			continue
		}
		for _, np := range objs.NodePools {
			where := fmt.Sprintf("trace: events[%d] (at %s).apply", i, e.At.Duration)
			was, known := static[np.Name]
			now := np.Spec.Replicas != nil
			switch {
			case now && !s.cfg.StaticCapacity:
				return fmt.Errorf("%s: %s", where, staticRefused(np))
			case known && was != now:
				return fmt.Errorf("%s: NodePool %s: a NodePool cannot switch between static (spec.replicas) and dynamic in place; apply it under another name", where, np.Name)
			}
			static[np.Name] = now
		}
	}
	return nil
}

// staticRefused is why a run refuses a static NodePool without the gate:
// the controller would launch nothing for it, which a run cannot usefully
// show.
func staticRefused(np *v1.NodePool) string {
	return fmt.Sprintf("NodePool %s: spec.replicas (a static NodePool) launches nodes only under the StaticCapacity feature gate; pass --feature-gates StaticCapacity=true, as the controller's FEATURE_GATES would have it, or remove spec.replicas", np.Name)
}

// problem notes, once, what the run could not do as asked.
func (s *sim) problem(why string) {
	if !slices.Contains(s.problems, why) {
		s.problems = append(s.problems, why)
	}
}
