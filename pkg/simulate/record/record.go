// Package record turns what a cluster's workloads did into a trace for
// `joiner simulate`: the Deployments' and StatefulSets' replicas over
// time, the Jobs that ran and for how long, the bare Pods that came and
// went, and the NodePools' changes. It reads them from a live
// cluster's watch stream (Watch) or from an API server audit log
// (ReadAudit); both feed a Recording, which writes the trace and the
// manifests it refers to.
package record

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/simulate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Recording accumulates a cluster's workload changes from start. It is
// safe for the informers' goroutines to feed at once.
type Recording struct {
	mu    sync.Mutex
	start time.Time
	// events are the trace's, in the order seen; Finish sorts them.
	events []simulate.Event
	// replicas is each scaled workload's (Deployment's, StatefulSet's)
	// last count, by kind/namespace/name; scaled their first full object,
	// the template the run starts from.
	replicas map[string]int
	scaled   map[string]any
	jobs     map[string]*job
	// pods are the bare Pods seen, by namespace/name, and whether each is
	// there now.
	pods      map[string]bool
	nodePools map[string]*v1.NodePool
	// others are objects the run needs as they were at the start
	// (EC2NodeClasses, nodes), by kind/namespace/name.
	others map[string]any
	// specs are the Tracked objects' and the scaled workloads' last specs
	// (a workload's without its replicas), by kind/namespace/name.
	specs map[string]any
	// gone are the scaled workloads deleted, by kind/namespace/name: seen
	// again, they are new.
	gone map[string]bool
}

type job struct {
	obj     *batchv1.Job
	created time.Time
	// done is when it completed or failed; zero while it runs.
	done time.Time
}

// New starts a recording at start: the trace's time zero.
func New(start time.Time) *Recording {
	return &Recording{start: start, replicas: map[string]int{}, scaled: map[string]any{},
		jobs: map[string]*job{}, pods: map[string]bool{}, nodePools: map[string]*v1.NodePool{}, others: map[string]any{}, specs: map[string]any{}, gone: map[string]bool{}}
}

func key(ns, name string) string { return ns + "/" + name }

// since is at as a trace time: never before the start.
func (r *Recording) since(at time.Time) metav1.Duration {
	if at.Before(r.start) {
		return metav1.Duration{}
	}
	return metav1.Duration{Duration: at.Sub(r.start).Round(time.Second)}
}

// Deployment records a Deployment seen at at. The first sight of it gives
// its template; the run starts it at its replicas then, or at none when it
// was created during the recording (created), with a scale event at its
// creation. Later sights record changes of its replicas, and a change of
// the rest of its spec (a new template: a roll-out) as an apply event. A
// paused Deployment's spec changes are left until it is unpaused, when
// its roll-out starts.
func (r *Recording) Deployment(at time.Time, d *appsv1.Deployment, created bool) {
	cp := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: clean(d.ObjectMeta), Spec: *d.Spec.DeepCopy()}
	cp.Spec.Template.ObjectMeta = clean(cp.Spec.Template.ObjectMeta)
	var spec any // an untyped nil while paused
	if !d.Spec.Paused {
		s := cp.Spec.DeepCopy()
		s.Replicas = nil
		spec = s
	}
	r.workload(at, "Deployment", d.Namespace, d.Name, d.Spec.Replicas, created, cp, &cp.Spec.Replicas, spec)
}

// StatefulSet records a StatefulSet seen at at, as Deployment does.
func (r *Recording) StatefulSet(at time.Time, sts *appsv1.StatefulSet, created bool) {
	cp := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: clean(sts.ObjectMeta), Spec: *sts.Spec.DeepCopy()}
	cp.Spec.Template.ObjectMeta = clean(cp.Spec.Template.ObjectMeta)
	for i := range cp.Spec.VolumeClaimTemplates {
		t := &cp.Spec.VolumeClaimTemplates[i]
		t.ObjectMeta, t.Status = clean(t.ObjectMeta), corev1.PersistentVolumeClaimStatus{}
	}
	spec := cp.Spec.DeepCopy()
	spec.Replicas = nil
	r.workload(at, "StatefulSet", sts.Namespace, sts.Name, sts.Spec.Replicas, created, cp, &cp.Spec.Replicas, spec)
}

// workload records a scaled workload: cp, the manifest to start from
// (whose replicas field is start), at its first sight, and its replicas.
// spec is its spec without the replicas, nil when its changes are not to
// be recorded now: once seen, a change of it is an apply event of cp, as
// is a sight after a deletion.
func (r *Recording) workload(at time.Time, kind, ns, name string, want *int32, created bool, cp any, start **int32, spec any) {
	replicas := 1
	if want != nil {
		replicas = int(*want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := kind + "/" + key(ns, name)
	_, seen := r.scaled[k]
	if seen && (r.gone[k] || spec != nil && !equality.Semantic.DeepEqual(r.specs[k], spec)) {
		n := int32(replicas)
		*start = &n
		delete(r.gone, k)
		if spec != nil {
			r.specs[k] = spec
		}
		r.replicas[k] = replicas
		r.apply(at, cp)
		return
	}
	if !seen {
		r.specs[k] = spec
		first := int32(replicas)
		if created {
			first = 0
		}
		*start = &first
		r.scaled[k] = cp
		if _, ok := r.replicas[k]; !ok {
			r.replicas[k] = int(first)
		}
	}
	r.scale(at, kind, ns, name, replicas)
}

// WorkloadGone records that a Deployment or StatefulSet (kind) was
// deleted at at: a delete event, whose run takes a StatefulSet's claims
// as its retention policy says. One never seen whole (an audit log that
// only shows it scaled) is scaled to none.
func (r *Recording) WorkloadGone(at time.Time, kind, ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := kind + "/" + key(ns, name)
	if _, seen := r.scaled[k]; !seen {
		r.scale(at, kind, ns, name, 0)
		return
	}
	if r.gone[k] {
		return
	}
	r.gone[k] = true
	r.replicas[k] = 0
	r.events = append(r.events, simulate.Event{At: r.since(at), Delete: &simulate.Delete{Kind: kind, Name: key(ns, name)}})
}

// Scale records the replicas of a Deployment or StatefulSet (kind) at at
// when only the count is known: an audit log's write to the scale
// subresource, or a patch.
func (r *Recording) Scale(at time.Time, kind, ns, name string, replicas int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scale(at, kind, ns, name, replicas)
}

func (r *Recording) scale(at time.Time, kind, ns, name string, replicas int) {
	k := kind + "/" + key(ns, name)
	if last, ok := r.replicas[k]; ok && last == replicas {
		return
	}
	r.replicas[k] = replicas
	sc := &simulate.Scale{Replicas: replicas}
	if kind == "StatefulSet" {
		sc.StatefulSet = key(ns, name)
	} else {
		sc.Deployment = key(ns, name)
	}
	r.events = append(r.events, simulate.Event{At: r.since(at), Scale: sc})
}

// Pod records a bare Pod (one no controller owns) seen at at: there at the
// start, it is one of the run's manifests; created later, an apply event.
// The run places it: its node is left out, as the run may not start from
// that node.
func (r *Recording) Pod(at time.Time, p *corev1.Pod, created bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(p.Namespace, p.Name)
	if r.pods[k] {
		return
	}
	r.pods[k] = true
	cp := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: clean(p.ObjectMeta), Spec: *p.Spec.DeepCopy()}
	cp.Spec.NodeName = ""
	if !created || !at.After(r.start) {
		r.others["Pod/"+k] = cp
		return
	}
	r.apply(at, cp)
}

// PodGone records that a bare Pod seen was deleted at at.
func (r *Recording) PodGone(at time.Time, ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(ns, name)
	if !r.pods[k] {
		return
	}
	r.pods[k] = false
	r.events = append(r.events, simulate.Event{At: r.since(at), Delete: &simulate.Delete{Kind: "Pod", Name: k}})
}

// Job records a Job seen at at: from its first sight its pods, and once
// it has completed or failed, how long it ran. A Job still running when
// the recording ends ran until then.
func (r *Recording) Job(at time.Time, j *batchv1.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(j.Namespace, j.Name)
	seen := r.jobs[k]
	if done := finishedAt(j, at); seen == nil && !done.IsZero() && done.Before(r.start) {
		// It ran before the recording: nothing of it is in the trace.
		return
	}
	if seen == nil {
		cp := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: clean(j.ObjectMeta), Spec: *j.Spec.DeepCopy()}
		cp.Spec.Template.ObjectMeta = clean(cp.Spec.Template.ObjectMeta)
		// The Job controller's own selector and labels are its, not the
		// user's: the run makes the pods itself.
		cp.Spec.Selector, cp.Spec.ManualSelector = nil, nil
		for _, l := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
			delete(cp.Spec.Template.Labels, l)
		}
		// From its creation, or from the start for a Job that was running
		// before it.
		created := at
		if !j.CreationTimestamp.IsZero() {
			created = j.CreationTimestamp.Time
			if created.Before(r.start) {
				created = r.start
			}
		}
		seen = &job{obj: cp, created: created}
		r.jobs[k] = seen
	}
	if seen.done.IsZero() {
		seen.done = finishedAt(j, at)
	}
}

// JobGone records that a Job was deleted at at: its pods stop then, if
// they had not finished.
func (r *Recording) JobGone(at time.Time, ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seen := r.jobs[key(ns, name)]; seen != nil && seen.done.IsZero() {
		seen.done = at
	}
}

// finishedAt is when a Job completed or failed (at, when it does not say);
// zero while it runs.
func finishedAt(j *batchv1.Job, at time.Time) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			switch {
			case j.Status.CompletionTime != nil:
				return j.Status.CompletionTime.Time
			case !c.LastTransitionTime.IsZero():
				return c.LastTransitionTime.Time
			}
			return at
		}
	}
	return time.Time{}
}

// NodePool records a NodePool seen at at: its first sight is the run's
// starting manifest, unless it was created after the recording began
// (created), which is an apply event then; each later change of its spec
// is an apply event.
func (r *Recording) NodePool(at time.Time, np *v1.NodePool, created bool) {
	cp := &v1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"}, ObjectMeta: clean(np.ObjectMeta), Spec: *np.Spec.DeepCopy()}
	r.mu.Lock()
	defer r.mu.Unlock()
	last, seen := r.nodePools[np.Name]
	r.nodePools[np.Name] = cp
	switch {
	case !seen && (!created || !at.After(r.start)):
		r.others["NodePool/"+key("", np.Name)] = cp
	case seen && equality.Semantic.DeepEqual(last.Spec, cp.Spec):
	default:
		r.apply(at, cp)
	}
}

// NodePoolGone records that NodePool name was deleted at at: a delete
// event, which in the run takes the pool's nodes with it. Made again
// later, it is an apply event then.
func (r *Recording) NodePoolGone(at time.Time, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.nodePools[name]; !seen {
		return
	}
	delete(r.nodePools, name)
	r.events = append(r.events, simulate.Event{At: r.since(at), Delete: &simulate.Delete{Kind: "NodePool", Name: name}})
}

// Tracked records an object of kind whose changes a run can apply (a
// PodDisruptionBudget, a DaemonSet, an EC2NodeClass): as it was at the start, or, when
// it was created after the recording began, an apply event then; and
// each later change of spec, what a change is judged by (its status
// changes often and is not the object's), as an apply event.
func (r *Recording) Tracked(at time.Time, kind, ns, name string, obj, spec any, created bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := kind + "/" + key(ns, name)
	last, seen := r.specs[k]
	r.specs[k] = spec
	switch {
	case !seen && (!created || !at.After(r.start)):
		r.others[k] = obj
	case seen && equality.Semantic.DeepEqual(last, spec):
	default:
		r.apply(at, obj)
	}
}

// Untracked records that a Tracked object (a DaemonSet, a
// PodDisruptionBudget) was deleted at at: a delete event.
func (r *Recording) Untracked(at time.Time, kind, ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := kind + "/" + key(ns, name)
	if _, seen := r.specs[k]; !seen {
		return
	}
	delete(r.specs, k)
	r.events = append(r.events, simulate.Event{At: r.since(at), Delete: &simulate.Delete{Kind: kind, Name: key(ns, name)}})
}

func (r *Recording) apply(at time.Time, obj any) {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return
	}
	r.events = append(r.events, simulate.Event{At: r.since(at), Apply: string(raw)})
}

// Object records an object the run needs as it was at the start, such as
// an EC2NodeClass; kind names it.
func (r *Recording) Object(kind, ns, name string, obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.others[kind+"/"+key(ns, name)]; !ok {
		r.others[kind+"/"+key(ns, name)] = obj
	}
}

// Finish ends the recording at end: the trace (events in time order, its
// duration end less start) and the manifests its events refer to, each
// as it was at the start: the workload (the Deployments, and the Jobs,
// templates the run starts from its job events) and the configuration
// (the NodePools and the other objects).
func (r *Recording) Finish(end time.Time) (trace *simulate.Trace, workload, config []any, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !end.After(r.start) {
		return nil, nil, nil, fmt.Errorf("the recording ends (%s) before it starts (%s): record for longer", end.Format(time.RFC3339), r.start.Format(time.RFC3339))
	}
	events := append([]simulate.Event(nil), r.events...)
	for _, k := range slices.Sorted(maps.Keys(r.jobs)) {
		j := r.jobs[k]
		done := j.done
		if done.IsZero() || done.After(end) {
			done = end
		}
		pods := 1
		if j.obj.Spec.Parallelism != nil {
			pods = int(*j.obj.Spec.Parallelism)
		}
		if c := j.obj.Spec.Completions; c != nil && int(*c) < pods {
			pods = int(*c)
		}
		events = append(events, simulate.Event{At: r.since(j.created),
			Job: &simulate.JobRun{Job: k, Pods: pods, RunFor: metav1.Duration{Duration: max(done.Sub(j.created).Round(time.Second), time.Second)}}})
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Duration < events[j].At.Duration })
	trace = &simulate.Trace{Duration: metav1.Duration{Duration: end.Sub(r.start).Round(time.Second)}, Events: events}
	for _, k := range slices.Sorted(maps.Keys(r.scaled)) {
		workload = append(workload, r.scaled[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.jobs)) {
		workload = append(workload, r.jobs[k].obj)
	}
	for _, k := range slices.Sorted(maps.Keys(r.others)) {
		config = append(config, r.others[k])
	}
	return trace, workload, config, nil
}

// Unknown are the workloads (Kind/NAMESPACE/NAME) the trace scales whose
// manifests the recording never saw (an audit log that only shows them
// scaled): the run needs them with -f.
func (r *Recording) Unknown() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.replicas {
		if _, ok := r.scaled[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// clean is an object's metadata as a manifest gives it: its name,
// namespace, labels and the annotations that are not the API server's or
// kubectl's bookkeeping.
func clean(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels}
	for k, v := range m.Annotations {
		if k == "kubectl.kubernetes.io/last-applied-configuration" || k == "deployment.kubernetes.io/revision" || strings.HasPrefix(k, "karpenter.sh/nodepool-hash") {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}
