package scheduling

import (
	"fmt"
	"sort"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// A requirement's minValues asks that a NodeClaim's instance-type options
// together carry at least that many values of its key, so that a launch can
// fall back across that many families, sizes or zones. The options are also
// capped (CreateFleet takes 60), and the cap may cut values a requirement
// needs: the options are therefore chosen for minValues first and for price
// second.

// minValuesKeys lists, sorted, the requirement keys with minValues.
func minValuesKeys(reqs requirements.Requirements) []string {
	var keys []string
	for k, r := range reqs {
		if r.MinValues != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// option is one instance type a NodeClaim may launch as, at its best price.
type option struct {
	t     *itype
	price float64
	off   cloudprovider.Offering
}

// typeValues calls add with each value that instance type t gives key on a
// node whose offerings accept allows: zone and capacity type come from
// those offerings, every other key from the type's labels.
func typeValues(t *itype, key string, accept func(cloudprovider.Offering) bool, add func(string)) {
	switch key {
	case corev1.LabelTopologyZone, v1.LabelCapacityType:
		for _, o := range t.it.Offerings {
			if !o.Available || !accept(o) {
				continue
			}
			if key == corev1.LabelTopologyZone {
				add(o.Zone)
			} else {
				add(o.CapacityType)
			}
		}
	default:
		if v, ok := t.it.Labels[key]; ok {
			add(v)
		}
	}
}

// shortfall is a requirement whose minValues a NodeClaim's options miss.
type shortfall struct {
	key string
	// want is minValues; got is what the chosen options carry; available
	// is what every option that fits carries, before the cap.
	want, got, available int
	cap                  int
}

func (sf shortfall) Error() string {
	const fix = "MIN_VALUES_POLICY=Strict: lower minValues, widen the NodePool's requirements, or set MIN_VALUES_POLICY=BestEffort to launch with fewer"
	if sf.available < sf.want {
		return fmt.Sprintf("minValues %d of requirement %q cannot be met: the instance types that can hold the pods have only %d value(s) (%s)",
			sf.want, sf.key, sf.available, fix)
	}
	return fmt.Sprintf("minValues %d of requirement %q cannot be met within the %d instance types a NodeClaim may offer: they carry only %d value(s) alongside the other minValues (%s)",
		sf.want, sf.key, sf.cap, sf.got, fix)
}

// relaxed is the NodeClaim's requirement with minValues lowered to what its
// options carry, as BestEffort launches it.
func (sf shortfall) relaxed(r *requirements.Requirement) *requirements.Requirement {
	if r == nil {
		return nil
	}
	out := *r
	out.MinValues = nil
	if sf.got > 0 {
		got := sf.got
		out.MinValues = &got
	}
	return &out
}

// chooseOptions picks a NodeClaim's launch options from opts, which fit its
// pods and are in price order: the cheapest; then, for each minValues
// requirement, the cheapest option carrying each value still missing; then
// the cheapest within the price band, up to the cap. It reports each
// requirement left short.
func (s *solver) chooseOptions(n *node, opts []option, accept func(cloudprovider.Offering) bool) ([]option, []shortfall) {
	keys, max := n.pool.minValues, s.opts.MaxInstanceTypes
	cheapest := opts[0].price
	if len(keys) == 0 {
		// The common case, on every trial sizing: the band, in price order.
		var chosen []option
		for _, o := range opts {
			if len(chosen) >= max || o.price > cheapest*s.opts.PriceBand+1e-9 {
				break
			}
			chosen = append(chosen, o)
		}
		return chosen, nil
	}
	in := map[*itype]bool{}
	var seen map[string]map[string]struct{}
	var chosen []option
	count := func() {
		seen = make(map[string]map[string]struct{}, len(keys))
		for _, k := range keys {
			seen[k] = map[string]struct{}{}
			for _, o := range chosen {
				typeValues(o.t, k, accept, func(v string) { seen[k][v] = struct{}{} })
			}
		}
	}
	add := func(o option) {
		chosen = append(chosen, o)
		in[o.t] = true
		for _, k := range keys {
			typeValues(o.t, k, accept, func(v string) { seen[k][v] = struct{}{} })
		}
	}
	count()
	add(opts[0])
	for _, k := range keys {
		want := *n.pool.reqs[k].MinValues
		for _, o := range opts {
			if len(seen[k]) >= want {
				break
			}
			if in[o.t] {
				continue
			}
			adds := false
			typeValues(o.t, k, accept, func(v string) {
				if _, ok := seen[k][v]; !ok {
					adds = true
				}
			})
			if adds {
				add(o)
			}
		}
	}
	if len(chosen) > max {
		for _, o := range chosen[max:] {
			delete(in, o.t)
		}
		chosen = chosen[:max]
		count()
	}
	for _, o := range opts {
		if len(chosen) >= max || o.price > cheapest*s.opts.PriceBand+1e-9 {
			break
		}
		if !in[o.t] {
			add(o)
		}
	}
	sort.SliceStable(chosen, func(i, j int) bool {
		if chosen[i].price != chosen[j].price {
			return chosen[i].price < chosen[j].price
		}
		return chosen[i].t.it.Name < chosen[j].t.it.Name
	})
	var short []shortfall
	for _, k := range keys {
		want := *n.pool.reqs[k].MinValues
		if len(seen[k]) >= want {
			continue
		}
		all := map[string]struct{}{}
		for _, o := range opts {
			typeValues(o.t, k, accept, func(v string) { all[v] = struct{}{} })
		}
		short = append(short, shortfall{key: k, want: want, got: len(seen[k]), available: len(all), cap: max})
	}
	return chosen, short
}

// minValuesReachable checks, before a pod of pg joins new node n, that the
// instance types still able to hold the node's pods carry enough values for
// every minValues requirement. Pods only ever narrow those types, so a
// failure here is final for the node, and the pod tries the next NodePool
// as under Karpenter's Strict policy. chooseOptions has the last word, as
// only it applies the cap on options.
func (s *solver) minValuesReachable(pg *podGroup, pc *podConstraints, n *node) error {
	p := n.pool
	used := n.used.Add(pg.requests)
	zoneReq, ctReq := n.requirements[corev1.LabelTopologyZone], n.requirements[v1.LabelCapacityType]
	if r, ok := pc.nodeReqs[corev1.LabelTopologyZone]; ok && zoneReq != nil {
		zoneReq = zoneReq.Intersect(r)
	}
	if r, ok := pc.nodeReqs[v1.LabelCapacityType]; ok && ctReq != nil {
		ctReq = ctReq.Intersect(r)
	}
	accept := offeringFilter(zoneReq, ctReq)
	narrowed := n.narrowed()
	seen := make([]map[string]struct{}, len(p.minValues))
	for i := range seen {
		seen[i] = map[string]struct{}{}
	}
	met := 0
	for _, t := range p.types {
		if !used.Fits(t.free) || !extendedOK(used, t.alloc) {
			continue
		}
		if s.typeCompatible(pc.nodeReqs, t.reqs) != nil || (len(narrowed) > 0 && s.typeCompatible(narrowed, t.reqs) != nil) || !s.podsCompatibleWithType(n, t) {
			continue
		}
		if _, ok := t.it.CheapestOffering(accept); !ok {
			continue
		}
		for i, k := range p.minValues {
			want := *p.reqs[k].MinValues
			if len(seen[i]) >= want {
				continue
			}
			typeValues(t, k, accept, func(v string) { seen[i][v] = struct{}{} })
			if len(seen[i]) >= want {
				met++
			}
		}
		if met == len(p.minValues) {
			return nil
		}
	}
	for i, k := range p.minValues {
		if want := *p.reqs[k].MinValues; len(seen[i]) < want {
			return shortfall{key: k, want: want, got: len(seen[i]), available: len(seen[i]), cap: s.opts.MaxInstanceTypes}
		}
	}
	return nil
}
