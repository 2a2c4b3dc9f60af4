package scheduling

import (
	"errors"
	"fmt"

	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// rejection says why a pod does not fit a node. Monotonic rejections only
// get worse as nodes fill (resources, taints, labels, anti-affinity), so
// scans may skip those nodes for later pods of the same group.
type rejection struct {
	err        error
	monotonic  bool
	exceedsCap bool
}

// The two commonest rejections, shared: a scan meets them at nearly every
// node it passes, and reads them only.
var (
	rejectDeleting     = &rejection{err: errors.New("node is being deleted"), monotonic: true}
	rejectInsufficient = &rejection{err: errors.New("insufficient resources"), monotonic: true, exceedsCap: true}
)

// check tests a pod against a node without changing anything. Callers
// must not change the rejection.
func (s *solver) check(pg *podGroup, pc *podConstraints, n *node) *rejection {
	if n.deleting {
		return rejectDeleting
	}
	if !pg.requests.Add(n.used).Fits(n.capacity) {
		return rejectInsufficient
	}
	if t := pg.untolerated(n.taints, pc.toleratePreferNoSchedule); t != nil {
		return s.untoleratedBy(t)
	}
	if err := s.nodeCompatible(n, pc); err != nil {
		return &rejection{err: err, monotonic: true}
	}
	if rej := s.checkAttach(pg, n); rej != nil {
		return rej
	}
	for _, hp := range pg.hostPorts {
		for _, used := range n.hostPorts {
			if hp.Conflicts(used) {
				return &rejection{err: fmt.Errorf("host port %d/%s is in use", hp.Port, hp.Protocol), monotonic: true}
			}
		}
	}
	if err := s.domainsAllowed(pg, pc, n); err != nil {
		// Spread and affinity can open up as other pods land; anti-affinity
		// and per-node spread cannot.
		mono := true
		for _, g := range pc.spreads {
			if g.key != corev1.LabelHostname {
				mono = false
			}
		}
		if len(pc.affinity) > 0 {
			mono = false
		}
		return &rejection{err: err, monotonic: mono}
	}
	if !n.existing && len(n.pool.minValues) > 0 && s.opts.MinValuesPolicy == MinValuesPolicyStrict {
		if err := s.minValuesReachable(pg, pc, n); err != nil {
			return &rejection{err: err, monotonic: true}
		}
	}
	return nil
}

// untoleratedBy is the rejection for a taint, made once for each taint a
// plan meets: a scan meets a tainted pool's taint at every node of the pool
// for each pod without the toleration, and making the rejection each time
// was 7.6 GB, a tenth of what the controller allocated in an hour and a
// half of the scale run.
func (s *solver) untoleratedBy(t *corev1.Taint) *rejection {
	if r, ok := s.untolerated[t]; ok {
		return r
	}
	if s.untolerated == nil {
		s.untolerated = map[*corev1.Taint]*rejection{}
	}
	r := &rejection{err: untoleratedError{*t}, monotonic: true}
	s.untolerated[t] = r
	return r
}

// untoleratedError is a taint a pod does not tolerate, written out only
// when read: a scan meets it at every node of a tainted pool.
type untoleratedError struct{ taint corev1.Taint }

func (e untoleratedError) Error() string { return "did not tolerate taint " + taintString(e.taint) }

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// nodeCompatible checks the pod's node predicates against what the node's
// labels can be: for an existing node its labels; for a new node its
// NodePool's requirements and its instance type's labels together.
func (s *solver) nodeCompatible(n *node, pc *podConstraints) error {
	if n.existing {
		return requirements.LabelsCompatible(n.labels, pc.nodeReqs)
	}
	return labelsCompatible(n.requirements, n.target.reqs, pc.nodeReqs)
}

// decideDomains picks, for every topology key the pod involves, the domain
// the node will be in, honouring spread, affinity and anti-affinity.
func (s *solver) decideDomains(pg *podGroup, pc *podConstraints, n *node) (map[string]string, error) {
	return s.domainsFor(pg, pc, n, true)
}

// domainsAllowed is decideDomains for a check, which needs only the
// error: no map is built for each node a scan passes.
func (s *solver) domainsAllowed(pg *podGroup, pc *podConstraints, n *node) error {
	_, err := s.domainsFor(pg, pc, n, false)
	return err
}

func (s *solver) domainsFor(pg *podGroup, pc *podConstraints, n *node, record bool) (map[string]string, error) {
	keys := pc.topologyKeys(pg)
	if len(keys) == 0 {
		return nil, nil
	}
	var out map[string]string
	if record {
		out = make(map[string]string, len(keys))
	}
	for _, key := range keys {
		allowed, err := s.allowedDomains(pc, pg, n, key)
		if err != nil {
			return nil, err
		}
		if r, ok := pc.nodeReqs[key]; ok {
			filtered := allowed[:0:0]
			for _, d := range allowed {
				if r.Has(d) {
					filtered = append(filtered, d)
				}
			}
			allowed = filtered
		}
		if len(allowed) == 0 {
			return nil, fmt.Errorf("no %s domain satisfies the pod's constraints", key)
		}
		if record {
			out[key] = s.pickDomain(pg, pc, key, allowed)
		}
	}
	return out, nil
}

// pickDomain balances: the domain where the pod's spread groups (own or
// matched) have the fewest pods; ties go to the first name.
func (s *solver) pickDomain(pg *podGroup, pc *podConstraints, key string, allowed []string) string {
	if len(allowed) == 1 {
		return allowed[0]
	}
	var g *topoGroup
	for _, c := range append(append([]*topoGroup{}, pc.spreads...), pg.matchedBy...) {
		if c.key == key && c.kind == topoSpread {
			g = c
			break
		}
	}
	if g == nil {
		return allowed[0]
	}
	best := allowed[0]
	for _, d := range allowed[1:] {
		if g.counts[d] < g.counts[best] {
			best = d
		}
	}
	return best
}

// podsCompatibleWithType re-checks the node's pods against another type's
// labels, since pods may select on instance labels the target satisfied.
func (s *solver) podsCompatibleWithType(n *node, t *itype) bool {
	if t == n.target {
		return true
	}
	for g := range n.groups {
		if !s.groupTypeCompatible(g, n.pool, t) {
			return false
		}
	}
	return true
}

// typeCompatible checks predicates against an instance type's labels. Keys
// the type does not define are fine when they are custom labels (the
// NodePool sets them) and absent when they are well-known instance labels.
func (s *solver) typeCompatible(preds, typeReqs requirements.Requirements) error {
	for k, p := range preds {
		t, ok := typeReqs[k]
		if !ok {
			if _, known := s.knownKeys[k]; known && !p.AbsentOK() {
				return fmt.Errorf("instance type has no label %q (requires %s)", k, p)
			}
			continue
		}
		if !t.Intersects(p) {
			return fmt.Errorf("requires %s, instance type has %s", p, t)
		}
	}
	return nil
}

func (s *solver) groupPoolCompatible(pg *podGroup, p *pool) bool {
	sh := pg.shape
	if c := sh.poolOK[p.idx]; c != 0 {
		return c == 1
	}
	pc := pg.variants[0]
	ok := true
	if pg.untolerated(p.taints, pc.toleratePreferNoSchedule) != nil {
		ok = false
	} else if p.reqs.Compatible(s.podNodeReqs(pc, p)) != nil {
		ok = false
	}
	sh.poolOK[p.idx] = boolByte(ok)
	return ok
}

// podNodeReqs drops predicates on well-known labels the pool leaves open;
// those are checked against the instance type instead.
func (s *solver) podNodeReqs(pc *podConstraints, p *pool) requirements.Requirements {
	out := requirements.Requirements{}
	for k, r := range pc.nodeReqs {
		if _, ok := p.reqs[k]; !ok {
			if _, known := s.knownKeys[k]; known {
				continue
			}
		}
		out[k] = r
	}
	return out
}

// groupTypeCompatible reports whether the group's strictest constraints
// allow the instance type; cached per shape, as shapes share constraints.
func (s *solver) groupTypeCompatible(pg *podGroup, p *pool, t *itype) bool {
	sh := pg.shape
	if c := sh.typeOK[t.id]; c != 0 {
		return c == 1
	}
	ok := s.typeCompatible(pg.variants[0].nodeReqs, t.reqs) == nil && extendedOK(pg.requests, t.alloc)
	sh.typeOK[t.id] = boolByte(ok)
	return ok
}

func boolByte(b bool) int8 {
	if b {
		return 1
	}
	return 2
}

func extendedOK(req, alloc resources.Resources) bool {
	for k, v := range req.Ext {
		if v > 0 && alloc.Ext[k] <= 0 {
			return false
		}
	}
	return true
}
