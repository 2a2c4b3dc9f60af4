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
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"k8s.io/apimachinery/pkg/api/equality"
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
	if err := trace.Validate(cfg.Objects); err != nil {
		return nil, err
	}
	if err := s.checkApplies(trace); err != nil {
		return nil, err
	}
	s.end = s.start.Add(trace.Duration.Duration)
	for _, e := range trace.Events {
		e := e
		s.at(s.start.Add(e.At.Duration), func() { s.apply(e) })
	}
	for _, key := range s.ownerNames {
		o := s.owners[key]
		for len(o.pods) < o.want {
			s.newPod(o)
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
		Decisions: s.rec.decisions, Blocked: s.rec.blockedBy, Problems: append(bounds.problems(), s.problems...)}, nil
}

// newSim sets the cluster up from cfg's manifests, refusing what the
// simulator does not model, by name.
func newSim(cfg Config) (*sim, error) {
	objs := cfg.Objects
	var unsupported []string
	if len(objs.Claims)+len(objs.Volumes) > 0 {
		unsupported = append(unsupported, "PersistentVolumeClaims and PersistentVolumes: the simulator does not model volumes yet; remove them from -f")
	}
	for _, p := range objs.Pods {
		if len(pods.ClaimNames(p)) > 0 {
			unsupported = append(unsupported, fmt.Sprintf("pod %s/%s mounts a PersistentVolumeClaim: the simulator does not model volumes yet", p.Namespace, p.Name))
			break
		}
	}
	if len(objs.Pods) > podsOf(objs) {
		unsupported = append(unsupported, "pods other than Deployments' and Jobs' (bare Pods, ReplicaSets, StatefulSets): the simulator scales Deployments and runs Jobs; give those workloads as Deployments, or remove them from -f")
	}
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
		unavailable: map[offering]time.Time{}, daemonSets: snap.DaemonSets, namespaces: snap.Namespaces}
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
	for _, d := range objs.Deployments {
		want := 1
		if d.Spec.Replicas != nil {
			want = int(*d.Spec.Replicas)
		}
		s.addOwner(&owner{key: d.Namespace + "/" + d.Name, template: d.Spec.Template, want: want})
	}
	for _, j := range objs.Jobs {
		s.addOwner(&owner{key: j.Namespace + "/" + j.Name, template: j.Spec.Template, job: true, parallel: parallelism(j.Spec.Parallelism)})
	}
	return s, nil
}

func (s *sim) addOwner(o *owner) {
	o.pods = map[string]*simPod{}
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
		o := s.owners[e.Scale.Deployment]
		o.want = e.Scale.Replicas
		s.reconcile(o)
	case e.Job != nil:
		o := s.owners[e.Job.Job]
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

// reconcile makes o's pods number o.want, as the ReplicaSet controller
// does: it makes new pods, or deletes pending pods first, then those on
// the nodes running the most of o's pods, then the newest.
func (s *sim) reconcile(o *owner) {
	for len(o.pods) < o.want {
		s.newPod(o)
	}
	if len(o.pods) <= o.want {
		return
	}
	perNode := map[*simNode]int{}
	list := make([]*simPod, 0, len(o.pods))
	for _, key := range sortedKeys(o.pods) {
		p := o.pods[key]
		list = append(list, p)
		if p.node != nil {
			perNode[p.node]++
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if (a.node == nil) != (b.node == nil) {
			return a.node == nil
		}
		if a.node != nil && perNode[a.node] != perNode[b.node] {
			return perNode[a.node] > perNode[b.node]
		}
		return a.pod.CreationTimestamp.After(b.pod.CreationTimestamp.Time) || a.pod.CreationTimestamp.Equal(&b.pod.CreationTimestamp) && a.key > b.key
	})
	for _, p := range list[:len(list)-o.want] {
		s.removePod(p)
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
	for _, d := range objs.Deployments {
		key := d.Namespace + "/" + d.Name
		want := 1
		if d.Spec.Replicas != nil {
			want = int(*d.Spec.Replicas)
		}
		old := s.owners[key]
		if old == nil {
			s.addOwner(&owner{key: key, template: d.Spec.Template, want: want})
			s.reconcile(s.owners[key])
			continue
		}
		if !equality.Semantic.DeepEqual(old.template, d.Spec.Template) {
			// A rollout: the old pods go, new ones come.
			old.template = d.Spec.Template
			old.version++
			for _, key := range sortedKeys(old.pods) {
				s.removePod(old.pods[key])
			}
		}
		old.want = want
		s.reconcile(old)
	}
	for _, j := range objs.Jobs {
		key := j.Namespace + "/" + j.Name
		if o := s.owners[key]; o != nil {
			o.template, o.parallel = j.Spec.Template, parallelism(j.Spec.Parallelism)
			o.version++
		} else {
			s.addOwner(&owner{key: key, template: j.Spec.Template, job: true, parallel: parallelism(j.Spec.Parallelism)})
		}
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
