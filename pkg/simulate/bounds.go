package simulate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// bounds computes the LP lower bound (scheduling.LowerBound) of the pods
// at each sample (a static NodePool's room free to them, its nodes
// counted at their cheapest whatever the pods need), on a goroutine of its own: the bound needs only the
// pods' templates and counts, not the run's state, so it uses the second
// core while the run goes on. Equal workloads (a diurnal trace's every
// day, say) share one computation.
type bounds struct {
	mu    sync.Mutex
	bySig map[string]staticBound
	errs  []string
	sigs  []string
	// floors are what the static NodePools' nodes cost at least at each
	// sample (staticFloor), added to the pods' bound.
	floors  []float64
	last    string
	work    chan boundJob
	done    sync.WaitGroup
	pending map[string]bool
}

type boundJob struct {
	sig  string
	snap scheduling.Snapshot
	// listed, with static NodePools, is snap with their types at their
	// prices (staticBound).
	listed *scheduling.Snapshot
}

// staticBound is the bound of pods beside static NodePools: the larger of
// two lower bounds, each valid alone. With the static pools' room free to
// the pods, plus what their nodes cost (floor): tight when the pods do
// not fit them. With their types at their prices and no floor: tight when
// the pods fill them, where the first counts only the floor, since free
// room of no limit holds every pod it fits.
type staticBound struct{ free, listed float64 }

func (v staticBound) at(floor float64) float64 { return max(v.free+floor, v.listed) }

func newBounds(s *sim) *bounds {
	b := &bounds{bySig: map[string]staticBound{}, work: make(chan boundJob, 1024), pending: map[string]bool{}}
	b.done.Add(1)
	go func() {
		defer b.done.Done()
		for j := range b.work {
			v, err := scheduling.LowerBound(j.snap)
			bound := staticBound{free: v}
			if j.listed != nil && err == nil {
				bound.listed, err = scheduling.LowerBound(*j.listed)
			}
			b.mu.Lock()
			if err != nil {
				b.errs = append(b.errs, err.Error())
			}
			b.bySig[j.sig] = bound
			b.mu.Unlock()
		}
	}()
	return b
}

// request notes the bound of the pods now for sample i, computing it
// unless an equal workload's is known.
func (b *bounds) request(s *sim, i int) {
	b.floors = append(b.floors, s.staticFloor())
	if !s.boundStale && b.last != "" {
		b.sigs = append(b.sigs, b.last)
		return
	}
	s.boundStale = false
	counts := map[string]int{}
	for _, p := range s.pods {
		counts[fmt.Sprintf("%s@%d", p.owner.key, p.version)]++
	}
	keys := sortedKeys(counts)
	var sig strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sig, "%s=%d;", k, counts[k])
	}
	// The pools' configuration is part of what the bound depends on.
	for _, name := range sortedKeys(s.pools) {
		fmt.Fprintf(&sig, "|%s:%s:%p:%d:%d", name, s.poolHash[name], s.pools[name], s.typesGen, s.daemonGen)
	}
	key := sig.String()
	b.last = key
	b.sigs = append(b.sigs, key)
	if b.pending[key] {
		return
	}
	b.pending[key] = true
	snap := scheduling.Snapshot{DaemonSets: s.daemonSets}
	var listed *scheduling.Snapshot
	for _, name := range sortedKeys(s.pools) {
		types := s.poolTypes[name]
		if s.isStatic(name) {
			types = s.freeStatic(name)
			if listed == nil {
				listed = &scheduling.Snapshot{DaemonSets: s.daemonSets}
			}
		}
		snap.NodePools = append(snap.NodePools, scheduling.NodePool{NodePool: s.pools[name], InstanceTypes: types})
	}
	if listed != nil {
		for _, name := range sortedKeys(s.pools) {
			listed.NodePools = append(listed.NodePools, scheduling.NodePool{NodePool: s.pools[name], InstanceTypes: s.poolTypes[name]})
		}
	}
	// Each pod as its template made it: a ReplicaSet's or StatefulSet's
	// pods of an older template run on beside the new ones.
	byOwner := map[string]*simPod{}
	for _, p := range s.pods {
		byOwner[fmt.Sprintf("%s@%d", p.owner.key, p.version)] = p
	}
	for _, k := range keys {
		for n := 0; n < counts[k]; n++ {
			snap.Pods = append(snap.Pods, boundPod(byOwner[k].owner, byOwner[k].version, n))
		}
	}
	if listed != nil {
		listed.Pods = snap.Pods
	}
	b.work <- boundJob{sig: key, snap: snap, listed: listed}
}

// integrate waits for the bounds, fills each sample's, and returns the
// bound's cost over the run: each sample's bound held until the next
// sample or the end of the run, whichever comes first. canSave is what
// the commitments can take off the bill at most (commitmentsCanSave),
// which each sample's bound at list prices is lowered by.
func (b *bounds) integrate(samples []Sample, interval, duration time.Duration, canSave float64) float64 {
	close(b.work)
	b.done.Wait()
	total := 0.0
	for i := range samples {
		v := boundOnBill(b.bySig[b.sigs[i]].at(b.floors[i]), canSave)
		samples[i].BoundPerHour = round(v, 6)
		held := min(interval.Hours(), duration.Hours()-samples[i].Minutes/60)
		total += v * max(held, 0)
	}
	return total
}

// problems are the bound's errors, sorted and deduplicated; integrate
// has waited for them.
func (b *bounds) problems() []string {
	sort.Strings(b.errs)
	return slices.Compact(b.errs)
}

// boundPod is the nth pod of o's template version for the bound: in o's
// namespace, named apart from every other workload's and version's (a
// Deployment's and a StatefulSet's of one name are two workloads; only
// the Deployment's current pods keep the plain name).
func boundPod(o *owner, version, n int) *corev1.Pod {
	tmpl := o.templates[version]
	p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pods.DefaultRequests(&p.Spec)
	p.Namespace, p.Name = o.ns, fmt.Sprintf("%s-bound-%d", o.name, n)
	if o.kind != kindDeployment {
		p.Name = strings.ToLower(o.kind) + "-" + p.Name
	}
	if version != o.version {
		p.Name += fmt.Sprintf("-v%d", version)
	}
	return p
}
