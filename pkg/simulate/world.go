package simulate

import (
	"fmt"
	"math/rand"
	"sort"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sim is one run's cluster.
type sim struct {
	cfg   Config
	start time.Time
	now   time.Time
	end   time.Time
	q     queue
	seq   int
	rng   *rand.Rand

	pools    map[string]*v1.NodePool
	poolHash map[string]string
	// classes are the EC2NodeClasses by name, and classPrints their drift
	// fingerprints (classPrint).
	classes     map[string]*awsv1.EC2NodeClass
	classPrints map[string]string
	// typesGen counts the times the pools' types were worked out again
	// (refreshTypes), for the caches keyed on them.
	typesGen int
	// free are the static pools' types at no price, for the bound
	// (freeStatic); cleared with the types.
	free map[string][]*cloudprovider.InstanceType
	// canSave is the most the commitments can save (noteCanSave).
	canSave float64
	// problems are what the run could not do as asked, for Result.Problems.
	problems []string
	// poolTypes are each pool's instance types, NodeOverlays applied.
	poolTypes map[string][]*cloudprovider.InstanceType
	pdbs      []*policyv1.PodDisruptionBudget
	// daemonSets are the DaemonSets' pods as the planner takes them, from
	// daemonSetObjs by namespace/name; daemonGen counts their changes, for
	// the caches keyed on them (daemonsets.go).
	daemonSets    []*corev1.Pod
	daemonSetObjs map[string]*appsv1.DaemonSet
	daemonGen     int
	owners        map[string]*owner
	ownerNames    []string
	// versions numbers owners' templates (owner.version).
	versions int
	// store holds the claims, volumes and classes, and usage what each
	// pod with volumes attaches (storage.go).
	store *volumes.Index
	usage map[string]volumes.Usage

	pods    map[string]*simPod
	nodes   map[string]*simNode
	podSeq  int
	nodeSeq int

	// unavailable are offerings a launch found short, until when: the
	// planner's view, as the controller's unavailable-offerings cache.
	unavailable map[offering]time.Time
	// short are the trace's shortages: what EC2 refuses, until when.
	short []shortage

	batchOpen  bool
	batchFirst time.Time
	batchLast  time.Time
	bindQueued bool
	passQueued bool
	dirty      bool
	commands   []*command
	// namespaces are the manifests' namespaces' labels, as the planner's
	// Snapshot.Namespaces has them.
	namespaces map[string]map[string]string
	// shared is scheduling.Share of the pools as sharedKey describes them.
	shared    *scheduling.Shared
	sharedKey string
	// boundStale: the pods changed since the last sample's bound.
	boundStale bool
	live       int

	rec recorder
}

// owner is a workload (workloads.go): what makes pods and, when they are
// evicted, makes them again.
type owner struct {
	// key is ownerKey(kind, ns, name).
	key            string
	kind, ns, name string
	template       corev1.PodTemplateSpec
	// want is the replicas; a Job's pods are made by job events.
	want int
	// sts is a StatefulSet's spec: its claims and its ordering; made is
	// one more than the highest ordinal it ever made.
	sts  *appsv1.StatefulSet
	made int
	// deploy is a Deployment's spec: its roll-out strategy.
	deploy *appsv1.Deployment
	// nodeName is the Node of -f a bare Pod runs on at the start.
	nodeName string
	// runFor is how long a Job's pods run once bound; parallel is its
	// spec.parallelism, the pods a job event starts by default.
	runFor   time.Duration
	parallel int
	// version changes with the template: a number no other owner or
	// template of the run had (sim.versions); templates are the templates
	// by version, as pods made from older ones still run.
	version   int
	templates map[int]*corev1.PodTemplateSpec
	pods      map[string]*simPod
}

type simPod struct {
	pod *corev1.Pod
	// version is its owner's template version when it was made.
	version int
	// view is pod as planning sees it: with its volumes' zone in its
	// required node affinity (storage.go); pod itself otherwise.
	view  *corev1.Pod
	key   string
	owner *owner
	node  *simNode
	// pendingSince is when the pod last became pending.
	pendingSince time.Time
	// nominated is the in-flight node the provisioner launched for it.
	nominated string
	// doneAt ends a Job's pod, once bound.
	doneAt time.Time
}

type simNode struct {
	name      string
	pool      string
	it        *cloudprovider.InstanceType
	offering  cloudprovider.Offering
	labels    map[string]string
	taints    []corev1.Taint
	launched  time.Time
	readyAt   time.Time // zero until initialized
	lastEvent time.Time
	pods      map[string]*simPod
	// deleting: marked by a command, interrupted or expired; it takes no
	// new pods. gone: terminated, and its cost stopped.
	deleting bool
	gone     bool
	drifted  time.Time
	hash     string
	// classPrint is its EC2NodeClass's fingerprint at launch.
	classPrint string
	// underway is the command this node is a candidate of, if any.
	underway *command
}

type offering struct{ instanceType, zone, capacityType string }

type shortage struct {
	Shortage
	until time.Time
}

func (n *simNode) initialized() bool { return !n.readyAt.IsZero() }

// schedulingNode is n as the planner sees it.
func (s *sim) schedulingNode(n *simNode) *scheduling.Node {
	sn := &scheduling.Node{Name: n.name, Labels: n.labels, Taints: n.taints, Allocatable: n.it.Allocatable,
		NodePool: n.pool, InFlight: !n.initialized(), MarkedForDeletion: n.deleting || n.underway != nil && n.underway.marked,
		AttachLimits: n.it.AttachLimits}
	for _, key := range sortedKeys(n.pods) {
		sn.Pods = append(sn.Pods, n.pods[key].view)
	}
	return sn
}

// newPod makes a pod of o's template, pending from now.
func (s *sim) newPod(o *owner) *simPod {
	return s.newPodOf(o, o.version)
}

// newPodOf makes a pod of o's template version, pending from now: an
// older one is what a Deployment's old ReplicaSet makes mid-roll.
func (s *sim) newPodOf(o *owner, version int) *simPod {
	s.podSeq++
	tmpl := o.templates[version]
	p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pods.DefaultRequests(&p.Spec)
	p.Namespace = o.ns
	p = pods.WithLimitRanges(p, s.cfg.Objects.LimitRanges)
	p.Namespace, p.Name = o.ns, s.podName(o)
	p.UID = types.UID(fmt.Sprintf("uid-%s-%06d", p.Name, s.podSeq))
	p.CreationTimestamp = metav1.NewTime(s.now)
	p.Status.Phase = corev1.PodPending
	if o.kind != kindPod {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: ownerAPIVersion(o.kind), Kind: ownerKindOfPod(o.kind), Name: o.name, UID: types.UID("uid-" + o.key), Controller: &yes}}
	}
	sp := &simPod{pod: p, view: p, key: p.Namespace + "/" + p.Name, owner: o, version: version, pendingSince: s.now}
	if o.sts != nil {
		s.addClaims(volumes.StatefulClaims(o.sts, p))
		o.made = max(o.made, ordinal(o, p.Name)+1)
	}
	s.pods[sp.key] = sp
	o.pods[sp.key] = sp
	s.resolve(sp)
	s.workloadChanged()
	s.pendingAdded()
	return sp
}

// bind puts p on n, as kube-scheduler's binding and the kubelet's start.
func (s *sim) bind(p *simPod, n *simNode) {
	p.node = n
	p.nominated = ""
	p.pod.Spec.NodeName = n.name
	p.pod.Status.Phase = corev1.PodRunning
	started := metav1.NewTime(s.now)
	p.pod.Status.StartTime = &started
	// A do-not-disrupt of a duration ends with no change in the cluster:
	// decide again then.
	if d, err := time.ParseDuration(p.pod.Annotations[v1.AnnotationDoNotDisrupt]); err == nil && d > 0 {
		s.after(d, s.changed)
	}
	p.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	n.pods[p.key] = p
	s.bindClaims(p, n)
	s.resolve(p)
	s.podEvent(n)
	s.rec.pending(s.now.Sub(p.pendingSince))
	if p.owner.kind == kindStatefulSet || p.owner.rolling() {
		// OrderedReady starts the next ordinal once this one runs; a
		// roll-out goes on once this pod is available.
		s.reconcile(p.owner)
		if d := p.owner.deploy; d != nil && d.Spec.MinReadySeconds > 0 {
			s.after(time.Duration(d.Spec.MinReadySeconds)*time.Second, func() {
				if p.owner.rolling() {
					s.reconcile(p.owner)
				}
			})
		}
	}
	if p.owner.isJob() {
		p.doneAt = s.now.Add(p.owner.runFor)
		s.at(p.doneAt, func() {
			if s.pods[p.key] == p {
				s.removePod(p)
			}
		})
	}
}

// removePod deletes p (scaled down, finished, or evicted before its owner
// makes another).
func (s *sim) removePod(p *simPod) {
	delete(s.usage, p.key)
	delete(s.pods, p.key)
	delete(p.owner.pods, p.key)
	if p.node != nil {
		delete(p.node.pods, p.key)
		s.podEvent(p.node)
	}
	s.workloadChanged()
}

// evict removes p from its node; its owner makes a new pod, pending,
// except a bare Pod's, which nothing makes again.
func (s *sim) evict(p *simPod, reason string) {
	s.rec.evicted(reason)
	s.removePod(p)
	switch p.owner.kind {
	case kindJob:
		// A Job's pod evicted before it finished starts over.
		if p.doneAt.After(s.now) {
			s.newPod(p.owner)
		}
	case kindPod:
		p.owner.want = 0
		s.rec.lost++
	case kindStatefulSet:
		s.reconcile(p.owner)
	default:
		// Its ReplicaSet makes another of its template: mid-roll, an old
		// one's, and the roll-out goes on from there.
		s.newPodOf(p.owner, p.version)
		if p.owner.rolling() {
			s.reconcile(p.owner)
		}
	}
}

// podEvent is a pod bound to or gone from n: consolidateAfter counts from
// the last one, as the NodeClaim's lastPodEventTime does.
func (s *sim) podEvent(n *simNode) {
	n.lastEvent = s.now
	s.changed()
}

// changed marks the cluster as changed: the next disruption poll decides
// again, and pending pods may find room.
func (s *sim) changed() {
	s.dirty = true
	s.queuePass()
}

// pendingPods are the pods no node runs, by key.
func (s *sim) pendingPods() []*simPod {
	var out []*simPod
	for _, key := range sortedKeys(s.pods) {
		if p := s.pods[key]; p.node == nil {
			out = append(out, p)
		}
	}
	return out
}

// liveNodes are the nodes not yet terminated, by name.
func (s *sim) liveNodes() []*simNode {
	out := make([]*simNode, 0, len(s.nodes))
	for _, name := range sortedKeys(s.nodes) {
		if n := s.nodes[name]; !n.gone {
			out = append(out, n)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "default", key
}
