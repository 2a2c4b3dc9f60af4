package simulate

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	appsv1 "k8s.io/api/apps/v1"
)

// Epoch is when every run starts: a Monday at midnight UTC, so budget
// schedules fall on the same instants in every run.
var Epoch = time.Date(2026, time.January, 5, 0, 0, 0, 0, time.UTC)

// Run simulates trace under cfg. progress, when set, is called with the
// fraction of the trace done.
func Run(cfg Config, trace *Trace, progress func(float64)) (*Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	trace = trace.clone()
	if err := trace.Validate(cfg.Objects); err != nil {
		return nil, err
	}
	if err := s.checkApplies(trace); err != nil {
		return nil, err
	}
	return s.play(trace, progress), nil
}

// play runs the validated trace to its end.
func (s *sim) play(trace *Trace, progress func(float64)) *Result {
	cfg := s.cfg
	s.end = s.start.Add(trace.Duration.Duration)
	for _, e := range trace.Events {
		e := e
		s.at(s.start.Add(e.At.Duration), func() { s.apply(e) })
	}
	for _, key := range s.ownerNames {
		o := s.owners[key]
		s.reconcile(o)
		// A bare Pod of -f with a nodeName runs there from the start.
		for _, p := range o.pods {
			if o.nodeName != "" {
				s.bind(p, s.nodes[o.nodeName])
			}
		}
	}
	bounds := newBounds(s)
	s.at(s.start, func() { s.sample(bounds, progress) })
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		if e.at.After(s.end) {
			break
		}
		s.now = e.at
		e.fn()
	}
	s.now = s.end
	s.billChanged()
	for _, n := range s.liveNodes() {
		s.rec.terminated(n, s.end)
	}
	// Pods still pending count with their wait so far.
	for _, p := range s.pendingPods() {
		s.rec.pending(s.end.Sub(p.pendingSince))
	}
	boundCost := bounds.integrate(s.rec.samples, cfg.Timing.Sample, trace.Duration.Duration, s.canSave)
	if progress != nil {
		progress(1)
	}
	return &Result{Summary: s.rec.summary(cfg.Name, trace.Duration.Duration, boundCost), Samples: s.rec.samples,
		Decisions: s.rec.decisions, Blocked: s.rec.blockedBy, Problems: append(bounds.problems(), s.problems...)}
}

// newSim sets the cluster up from cfg's manifests, refusing what the
// simulator does not model, by name.
func newSim(cfg Config) (*sim, error) {
	objs := cfg.Objects
	var unsupported []string
	snap, problems := objs.Snapshot(cfg.InstanceTypes)
	for _, p := range problems {
		unsupported = append(unsupported, fmt.Sprintf("NodePool %s: %s", p.NodePool, p.Reason))
	}
	for _, np := range objs.NodePools {
		if np.Spec.Replicas != nil && !cfg.StaticCapacity {
			unsupported = append(unsupported, staticRefused(np))
		}
		// The controller would allow no disruption and log it at every
		// pass; a simulation of that says nothing.
		if err := disruption.Validate(np, Epoch); err != nil {
			unsupported = append(unsupported, fmt.Sprintf("NodePool %s: %v", np.Name, err))
		}
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(unsupported, "; "))
	}
	if len(snap.NodePools) == 0 {
		return nil, fmt.Errorf("no NodePool in the manifests: add a NodePool and its EC2NodeClass with -f")
	}
	if cfg.Timing.Sample <= 0 || cfg.Timing.DisruptionPoll <= 0 || cfg.Timing.BatchIdle <= 0 || cfg.Timing.BatchMax < cfg.Timing.BatchIdle {
		return nil, fmt.Errorf("timing: sample, disruption poll and batch idle must be positive, and batch max at least batch idle")
	}
	s := &sim{cfg: cfg, start: Epoch, now: Epoch, rng: rand.New(rand.NewSource(cfg.Timing.Seed)),
		pools: map[string]*v1.NodePool{}, poolHash: map[string]string{}, classPrints: map[string]string{}, classes: map[string]*awsv1.EC2NodeClass{}, poolTypes: map[string][]*cloudprovider.InstanceType{},
		owners: map[string]*owner{}, pods: map[string]*simPod{}, nodes: map[string]*simNode{},
		unavailable: map[offering]time.Time{}, daemonSets: snap.DaemonSets, daemonSetObjs: map[string]*appsv1.DaemonSet{}, namespaces: snap.Namespaces}
	for _, ds := range objs.DaemonSets {
		s.daemonSetObjs[ds.Namespace+"/"+ds.Name] = ds
	}
	s.rec = recorder{start: Epoch, billSince: Epoch, onBill: cfg.Commitments != nil, evictions: map[string]int{}, disruptions: map[string]int{}, blockedBy: map[string]int{}}
	for _, p := range snap.NodePools {
		s.pools[p.NodePool.Name] = p.NodePool
		s.poolHash[p.NodePool.Name] = p.NodePool.Hash()
		s.poolTypes[p.NodePool.Name] = p.InstanceTypes
	}
	for _, c := range objs.EC2NodeClasses {
		s.classes[c.Name] = c
		s.classPrints[c.Name] = classPrint(c)
	}
	for _, pdb := range objs.PodDisruptionBudgets {
		s.pdbs = append(s.pdbs, pdb)
	}
	s.noteCanSave()
	if err := s.startNodes(objs.Nodes); err != nil {
		return nil, err
	}
	s.billChanged()
	// A node its NodePool no longer admits has drifted.
	for _, name := range sortedKeys(s.pools) {
		s.markDrift(name)
	}
	s.startStorage(objs)
	if err := ownedRefused(objs); err != nil {
		return nil, err
	}
	for _, d := range objs.Deployments {
		if why := deploymentRefused(d, false); why != "" {
			return nil, fmt.Errorf("deployment %s/%s: %s", d.Namespace, d.Name, why)
		}
	}
	for _, o := range workloadsOf(objs) {
		if o.nodeName != "" && s.nodes[o.nodeName] == nil {
			return nil, fmt.Errorf("pod %s/%s: spec.nodeName %s is not a Node of -f; give the Node with -f, or remove spec.nodeName to let the run place the pod", o.ns, o.name, o.nodeName)
		}
		s.addOwner(o)
	}
	return s, nil
}

func (s *sim) addOwner(o *owner) {
	o.pods = map[string]*simPod{}
	s.newVersion(o)
	if _, ok := s.owners[o.key]; !ok {
		s.ownerNames = append(s.ownerNames, o.key)
		sort.Strings(s.ownerNames)
	}
	s.owners[o.key] = o
}

// apply carries out one trace event.
func (s *sim) apply(e Event) {
	switch {
	case e.Scale != nil:
		o := s.owners[e.Scale.owner()]
		if o == nil {
			s.problems = append(s.problems, fmt.Sprintf("at %s: scale of %s, which a delete event removed, was not carried out", e.At.Duration, e.Scale.owner()))
			return
		}
		o.want = e.Scale.Replicas
		s.reconcile(o)
	case e.Job != nil:
		ns, name := splitKey(e.Job.Job)
		o := s.owners[ownerKey(kindJob, ns, name)]
		if o == nil {
			s.problems = append(s.problems, fmt.Sprintf("at %s: job %s, which a delete event removed, was not started", e.At.Duration, e.Job.Job))
			return
		}
		o.runFor = e.Job.RunFor.Duration
		n := e.Job.Pods
		if n == 0 {
			n = o.parallel
		}
		for i := 0; i < n; i++ {
			s.newPod(o)
		}
	case e.Apply != "":
		objs, err := manifests.Parse("apply", strings.NewReader(e.Apply))
		if err == nil {
			s.applyObjects(objs)
			s.reconcileStatic()
		}
	case e.Delete != nil:
		s.delete(*e.Delete)
	case e.Interrupt != nil:
		var spot []*simNode
		for _, n := range s.liveNodes() {
			if n.offering.CapacityType == v1.CapacityTypeSpot && !n.deleting {
				spot = append(spot, n)
			}
		}
		s.rng.Shuffle(len(spot), func(i, j int) { spot[i], spot[j] = spot[j], spot[i] })
		for i := 0; i < e.Interrupt.SpotNodes && i < len(spot); i++ {
			s.interrupt(spot[i])
		}
	case e.Shortage != nil:
		s.short = append(s.short, shortage{Shortage: *e.Shortage, until: s.now.Add(e.Shortage.For.Duration)})
	}
}

// applyObjects replaces the manifests' objects of the same kind and name.
func (s *sim) applyObjects(objs *manifests.Objects) {
	if len(objs.NodePools)+len(objs.EC2NodeClasses) > 0 {
		s.workloadChanged()
	}
	for _, c := range objs.EC2NodeClasses {
		s.applyClass(c)
	}
	for _, np := range objs.NodePools {
		s.pools[np.Name] = np
		s.poolHash[np.Name] = np.Hash()
	}
	if len(objs.NodePools)+len(objs.EC2NodeClasses) > 0 {
		s.refreshTypes()
	}
	for _, np := range objs.NodePools {
		s.markDrift(np.Name)
	}
	s.applyWorkloads(objs)
	if len(objs.DaemonSets) > 0 {
		s.applyDaemonSets(objs.DaemonSets)
	}
	for _, pdb := range objs.PodDisruptionBudgets {
		replaced := false
		for i, old := range s.pdbs {
			if old.Namespace == pdb.Namespace && old.Name == pdb.Name {
				s.pdbs[i], replaced = pdb, true
			}
		}
		if !replaced {
			s.pdbs = append(s.pdbs, pdb)
		}
	}
	s.changed()
}

// sample records the cluster now and sends spot interruptions for the
// interval ahead.
func (s *sim) sample(b *bounds, progress func(float64)) {
	s.reconcileStatic()
	sm := Sample{Minutes: s.now.Sub(s.start).Minutes(), ByCapacity: map[string]int{}, ByType: map[string]int{}}
	for _, n := range s.liveNodes() {
		sm.Nodes++
		sm.CostPerHour += n.offering.Price
		if s.cfg.Commitments != nil {
			sm.ListPerHour += n.offering.Price
		}
		sm.ByCapacity[n.offering.CapacityType]++
		sm.ByType[n.it.Name]++
	}
	if s.cfg.Commitments != nil {
		sm.CostPerHour = s.rec.billRate
	}
	sm.CostPerHour = round(sm.CostPerHour, 6)
	for _, p := range s.pods {
		sm.Pods++
		if p.node == nil {
			sm.Pending++
		}
	}
	b.request(s, len(s.rec.samples))
	// A budget's schedule opens and closes windows with no change in the
	// cluster: decide again each sample while any pool has one.
	for _, np := range s.pools {
		for _, bd := range np.Spec.Disruption.Budgets {
			if bd.Schedule != nil {
				s.changed()
			}
		}
	}
	// Pods left pending with no node launching for them (a plan found
	// none, a launch failed) are tried again, as kube-scheduler's periodic
	// retry sends the provisioner another pod event.
	if sm.Pending > 0 && !s.batchOpen {
		for _, p := range s.pendingPods() {
			if n := s.nodes[p.nominated]; n == nil || n.gone || n.deleting || n.initialized() {
				s.pendingAdded()
				break
			}
		}
	}
	s.rec.samples = append(s.rec.samples, sm)
	if progress != nil {
		progress(float64(s.now.Sub(s.start)) / float64(s.end.Sub(s.start)))
	}
	t := s.cfg.Timing
	if rate := t.SpotInterruptionsPerHour; rate > 0 {
		chance := 1 - math.Exp(-rate*t.Sample.Hours())
		for _, n := range s.liveNodes() {
			if n.offering.CapacityType == v1.CapacityTypeSpot && !n.deleting && s.rng.Float64() < chance {
				at := s.now.Add(time.Duration(s.rng.Int63n(int64(t.Sample))))
				n := n
				s.at(at, func() { s.interrupt(n) })
			}
		}
	}
	s.after(t.Sample, func() { s.sample(b, progress) })
}

// workloadChanged marks the pods changed: the next sample's bound is
// computed again.
func (s *sim) workloadChanged() { s.boundStale = true }

// parallelism is a Job's spec.parallelism, 1 when unset.
func parallelism(p *int32) int {
	if p == nil || *p < 1 {
		return 1
	}
	return int(*p)
}
