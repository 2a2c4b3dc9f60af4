package simulate

import (
	"fmt"
	"os"
	"sort"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Trace is a workload over time: what happens to the cluster's workloads
// and configuration, and when. docs/simulate.md gives its format.
type Trace struct {
	// Duration is how long to simulate; the last event's time when zero.
	Duration metav1.Duration `json:"duration,omitempty"`
	Events   []Event         `json:"events"`
}

// Event is one change at At after the start. Exactly one of its changes
// is set.
type Event struct {
	At metav1.Duration `json:"at"`
	// Scale sets a Deployment's replicas.
	Scale *Scale `json:"scale,omitempty"`
	// Job starts a Job's pods, each running for a while.
	Job *JobRun `json:"job,omitempty"`
	// Apply replaces a NodePool, EC2NodeClass, workload (Deployment,
	// StatefulSet, ReplicaSet, Job, Pod) or PDB of the manifests by name
	// (a NodePool's or EC2NodeClass's change drifts their nodes), or adds
	// it.
	Apply string `json:"apply,omitempty"`
	// Delete deletes a workload (its pods go), a DaemonSet, a
	// PodDisruptionBudget or a NodePool (its nodes go).
	Delete *Delete `json:"delete,omitempty"`
	// Interrupt sends spot interruption warnings.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// Shortage makes offerings unavailable for a while, as EC2's
	// InsufficientInstanceCapacity does.
	Shortage *Shortage `json:"shortage,omitempty"`
}

// Scale sets the replicas of one Deployment, StatefulSet or ReplicaSet
// (NAMESPACE/NAME, or NAME in default).
type Scale struct {
	Deployment  string `json:"deployment,omitempty"`
	StatefulSet string `json:"statefulSet,omitempty"`
	ReplicaSet  string `json:"replicaSet,omitempty"`
	Replicas    int    `json:"replicas"`
}

// target is the kind and NAMESPACE/NAME the event scales, and how many of
// the three fields are set.
func (sc *Scale) target() (kind, name string, set int) {
	for _, f := range []struct{ kind, name string }{{kindDeployment, sc.Deployment}, {kindStatefulSet, sc.StatefulSet}, {kindReplicaSet, sc.ReplicaSet}} {
		if f.name != "" {
			kind, name = f.kind, qualified(f.name)
			set++
		}
	}
	return kind, name, set
}

// owner is the key of the workload the event scales.
func (sc *Scale) owner() string {
	kind, name, _ := sc.target()
	ns, n := splitKey(name)
	return ownerKey(kind, ns, n)
}

// Delete deletes Kind NAMESPACE/NAME: a Deployment, StatefulSet,
// ReplicaSet or Job with its pods, a Pod, a DaemonSet or a
// PodDisruptionBudget; or Kind NAME, a NodePool, whose NodeClaims go with
// it.
type Delete struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// JobRun starts Pods pods of Job (NAMESPACE/NAME), each running RunFor once
// bound; 0 Pods means the Job's parallelism.
type JobRun struct {
	Job    string          `json:"job"`
	Pods   int             `json:"pods,omitempty"`
	RunFor metav1.Duration `json:"runFor"`
}

// Interrupt warns SpotNodes spot nodes, chosen by the seed.
type Interrupt struct {
	SpotNodes int `json:"spotNodes"`
}

// Shortage makes every offering matching its non-empty fields unavailable
// for For.
type Shortage struct {
	InstanceType string          `json:"instanceType,omitempty"`
	Zone         string          `json:"zone,omitempty"`
	CapacityType string          `json:"capacityType,omitempty"`
	For          metav1.Duration `json:"for"`
}

// ReadTrace reads a trace file (YAML or JSON).
func ReadTrace(path string) (*Trace, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Trace
	if err := yaml.UnmarshalStrict(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &t, nil
}

// copied is a copy of what p points to, or nil: an event's parts hold no
// pointers of their own, so a shallow copy is a whole one.
func copied[T any](p *T) *T {
	if p == nil {
		return nil
	}
	cp := *p
	return &cp
}

// clone is a copy of t that Validate may change: --compare validates the
// one trace for each configuration at once.
func (t *Trace) clone() *Trace {
	out := &Trace{Duration: t.Duration, Events: make([]Event, len(t.Events))}
	for i, e := range t.Events {
		e.Scale, e.Job, e.Delete = copied(e.Scale), copied(e.Job), copied(e.Delete)
		e.Interrupt, e.Shortage = copied(e.Interrupt), copied(e.Shortage)
		out.Events[i] = e
	}
	return out
}

// Validate checks the trace against the manifests, naming the event and
// field at fault, and sorts the events by time.
func (t *Trace) Validate(objs *manifests.Objects) error {
	classes, pools, known := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range objs.EC2NodeClasses {
		classes[c.Name] = true
	}
	for _, np := range objs.NodePools {
		pools[np.Name] = true
	}
	for _, o := range workloadsOf(objs) {
		known[o.key] = true
	}
	for _, pdb := range objs.PodDisruptionBudgets {
		known[ownerKey("PodDisruptionBudget", pdb.Namespace, pdb.Name)] = true
	}
	for _, ds := range objs.DaemonSets {
		known[ownerKey("DaemonSet", ds.Namespace, ds.Name)] = true
	}
	// exists says whether kind NAMESPACE/NAME is in the manifests or an
	// apply before event i.
	exists := func(kind, name string, i int) bool {
		ns, n := splitKey(name)
		return known[ownerKey(kind, ns, n)] || t.applies(kind, name, i)
	}
	var errs []string
	for i := range t.Events {
		e := &t.Events[i]
		where := fmt.Sprintf("events[%d] (at %s)", i, e.At.Duration)
		set := 0
		for _, on := range []bool{e.Scale != nil, e.Job != nil, e.Apply != "", e.Delete != nil, e.Interrupt != nil, e.Shortage != nil} {
			if on {
				set++
			}
		}
		if set != 1 {
			errs = append(errs, fmt.Sprintf("%s: set exactly one of scale, job, apply, delete, interrupt or shortage (%d set)", where, set))
			continue
		}
		if e.At.Duration < 0 {
			errs = append(errs, fmt.Sprintf("%s.at: must not be negative", where))
		}
		switch {
		case e.Scale != nil:
			if e.Scale.Replicas < 0 {
				errs = append(errs, fmt.Sprintf("%s.scale.replicas: must not be negative", where))
			}
			switch kind, name, set := e.Scale.target(); {
			case set != 1:
				errs = append(errs, fmt.Sprintf("%s.scale: set exactly one of deployment, statefulSet and replicaSet (%d set)", where, set))
			case !exists(kind, name, i):
				errs = append(errs, fmt.Sprintf("%s.scale.%s: %s %s is not in the manifests; add it with -f or fix the name", where, lowerFirst(kind), kind, name))
			}
		case e.Job != nil:
			e.Job.Job = qualified(e.Job.Job)
			if !exists(kindJob, e.Job.Job, i) {
				errs = append(errs, fmt.Sprintf("%s.job.job: Job %s is not in the manifests; add it with -f or fix the name", where, e.Job.Job))
			}
			if e.Job.RunFor.Duration <= 0 {
				errs = append(errs, fmt.Sprintf("%s.job.runFor: must be positive, such as 20m", where))
			}
			if e.Job.Pods < 0 {
				errs = append(errs, fmt.Sprintf("%s.job.pods: must not be negative", where))
			}
		case e.Apply != "":
			objs, err := manifests.Parse(fmt.Sprintf("%s.apply", where), strings.NewReader(e.Apply))
			if err != nil {
				errs = append(errs, err.Error())
			} else if len(objs.NodeOverlays)+len(objs.Nodes)+len(objs.Namespaces)+len(objs.LimitRanges)+
				len(objs.Claims)+len(objs.Volumes)+len(objs.StorageClasses) > 0 {
				errs = append(errs, fmt.Sprintf("%s.apply: only NodePools, EC2NodeClasses, Deployments, StatefulSets, ReplicaSets, Jobs, Pods, DaemonSets and PodDisruptionBudgets are applied during a run; give the others with -f", where))
			} else {
				if err := ownedRefused(objs); err != nil {
					errs = append(errs, fmt.Sprintf("%s.apply: %v", where, err))
				}
				for _, sts := range objs.StatefulSets {
					// A roll-out mid-run goes one pod at a time, whole.
					if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && (ru.Partition != nil && *ru.Partition > 0 || ru.MaxUnavailable != nil && ru.MaxUnavailable.IntValue() != 1) {
						errs = append(errs, fmt.Sprintf("%s.apply: statefulset %s/%s: spec.updateStrategy.rollingUpdate: a partition or a maxUnavailable other than 1 is not modelled during a run; remove it from the applied StatefulSet", where, sts.Namespace, sts.Name))
					}
				}
				for _, d := range objs.Deployments {
					if why := deploymentRefused(d, true); why != "" {
						errs = append(errs, fmt.Sprintf("%s.apply: deployment %s/%s: %s", where, d.Namespace, d.Name, why))
					}
				}
				for _, p := range objs.BarePods {
					if p.Spec.NodeName != "" {
						errs = append(errs, fmt.Sprintf("%s.apply: pod %s/%s: spec.nodeName: a pod applied during a run is placed by the run; remove spec.nodeName", where, p.Namespace, p.Name))
					}
				}
				for _, c := range objs.EC2NodeClasses {
					if err := instancetype.CheckClass(c); err != nil {
						errs = append(errs, fmt.Sprintf("%s.apply: %v", where, err))
					}
				}
				for _, np := range objs.NodePools {
					if err := disruption.Validate(np, Epoch); err != nil {
						errs = append(errs, fmt.Sprintf("%s.apply: NodePool %s: %v", where, np.Name, err))
					}
					switch ref := np.Spec.Template.Spec.NodeClassRef; {
					case ref == nil:
						errs = append(errs, fmt.Sprintf("%s.apply: NodePool %s: spec.template.spec.nodeClassRef is missing; name the EC2NodeClass (group karpenter.k8s.aws, kind EC2NodeClass)", where, np.Name))
					case ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass":
						errs = append(errs, fmt.Sprintf("%s.apply: NodePool %s: spec.template.spec.nodeClassRef %s/%s is not supported; use group karpenter.k8s.aws, kind EC2NodeClass", where, np.Name, ref.Group, ref.Kind))
					case !classes[ref.Name] && !applied(objs, ref.Name) && !t.applies("EC2NodeClass", ref.Name, i):
						errs = append(errs, fmt.Sprintf("%s.apply: NodePool %s: spec.template.spec.nodeClassRef names no EC2NodeClass of the manifests or of an earlier apply; add the EC2NodeClass or fix the name", where, np.Name))
					}
				}
			}
		case e.Delete != nil && e.Delete.Kind == kindNodePool:
			switch {
			case strings.Contains(e.Delete.Name, "/"):
				errs = append(errs, fmt.Sprintf("%s.delete.name: %q: a NodePool has no namespace; give its name alone", where, e.Delete.Name))
			case !pools[e.Delete.Name] && !t.applies(kindNodePool, e.Delete.Name, i):
				errs = append(errs, fmt.Sprintf("%s.delete.name: NodePool %s is not in the manifests or an earlier apply; fix the name", where, e.Delete.Name))
			}
		case e.Delete != nil:
			e.Delete.Name = qualified(e.Delete.Name)
			switch e.Delete.Kind {
			case kindDeployment, kindStatefulSet, kindReplicaSet, kindJob, kindPod, "DaemonSet", "PodDisruptionBudget":
				if !exists(e.Delete.Kind, e.Delete.Name, i) {
					errs = append(errs, fmt.Sprintf("%s.delete.name: %s %s is not in the manifests or an earlier apply; fix the name", where, e.Delete.Kind, e.Delete.Name))
				}
			default:
				errs = append(errs, fmt.Sprintf("%s.delete.kind: %q cannot be deleted during a run; use Deployment, StatefulSet, ReplicaSet, Job, Pod, DaemonSet, PodDisruptionBudget or NodePool (an EC2NodeClass is held by its finalizer while nodes use it: delete the NodePools that name it)", where, e.Delete.Kind))
			}
		case e.Interrupt != nil:
			if e.Interrupt.SpotNodes <= 0 {
				errs = append(errs, fmt.Sprintf("%s.interrupt.spotNodes: must be positive", where))
			}
		case e.Shortage != nil:
			if e.Shortage.For.Duration <= 0 {
				errs = append(errs, fmt.Sprintf("%s.shortage.for: must be positive, such as 30m", where))
			}
			if e.Shortage.InstanceType == "" && e.Shortage.Zone == "" && e.Shortage.CapacityType == "" {
				errs = append(errs, fmt.Sprintf("%s.shortage: set at least one of instanceType, zone and capacityType", where))
			}
		}
	}
	if t.Duration.Duration < 0 {
		errs = append(errs, "duration: must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("trace: %s", strings.Join(errs, "; "))
	}
	sort.SliceStable(t.Events, func(i, j int) bool { return t.Events[i].At.Duration < t.Events[j].At.Duration })
	if t.Duration.Duration == 0 && len(t.Events) > 0 {
		t.Duration.Duration = t.Events[len(t.Events)-1].At.Duration
	}
	if t.Duration.Duration == 0 {
		return fmt.Errorf("trace: duration: set how long to simulate, such as 24h (the trace has no events to end it)")
	}
	return nil
}

// applies reports whether an event that runs before event i (earlier, or
// at the same time and listed before it) applies kind NAMESPACE/NAME, or
// kind NAME when it is an EC2NodeClass or a NodePool.
func (t *Trace) applies(kind, name string, i int) bool {
	at := t.Events[i].At.Duration
	for j, e := range t.Events {
		if e.Apply == "" || e.At.Duration > at || e.At.Duration == at && j >= i {
			continue
		}
		objs, err := manifests.Parse("apply", strings.NewReader(e.Apply))
		if err != nil {
			continue
		}
		if kind != "EC2NodeClass" {
			for _, o := range workloadsOf(objs) {
				if o.key == ownerKey(kind, o.ns, o.name) && o.ns+"/"+o.name == name {
					return true
				}
			}
			for _, pdb := range objs.PodDisruptionBudgets {
				if kind == "PodDisruptionBudget" && pdb.Namespace+"/"+pdb.Name == name {
					return true
				}
			}
			for _, ds := range objs.DaemonSets {
				if kind == "DaemonSet" && ds.Namespace+"/"+ds.Name == name {
					return true
				}
			}
		}
		switch kind {
		case "EC2NodeClass":
			if applied(objs, name) {
				return true
			}
		case kindNodePool:
			for _, np := range objs.NodePools {
				if np.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// qualified is name with the default namespace when it has none.
func qualified(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return "default/" + name
}

// lowerFirst is a kind as a field name: StatefulSet, statefulSet.
func lowerFirst(kind string) string { return strings.ToLower(kind[:1]) + kind[1:] }

// applied reports whether objs hold the EC2NodeClass name.
func applied(objs *manifests.Objects, name string) bool {
	for _, c := range objs.EC2NodeClasses {
		if c.Name == name {
			return true
		}
	}
	return false
}
