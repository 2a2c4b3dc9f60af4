package simulate

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of workload the simulator runs, each as its controller keeps
// its pods: a Deployment's or ReplicaSet's replicas are interchangeable;
// a StatefulSet's are numbered, keep their names and claims, and start in
// order; a Job's pods run once; a bare Pod is not made again once evicted.
const (
	kindDeployment  = "Deployment"
	kindReplicaSet  = "ReplicaSet"
	kindStatefulSet = "StatefulSet"
	kindJob         = "Job"
	kindPod         = "Pod"
)

// ownerKey names an owner by kind, so that a Deployment and a StatefulSet
// of one name are two workloads.
func ownerKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

func (o *owner) isJob() bool { return o.kind == kindJob }

// workloadsOf are the owners of objs' workloads, not yet added.
func workloadsOf(objs *manifests.Objects) []*owner {
	var out []*owner
	add := func(kind, ns, name string, tmpl corev1.PodTemplateSpec, replicas *int32) *owner {
		want := 1
		if replicas != nil {
			want = int(*replicas)
		}
		o := &owner{key: ownerKey(kind, ns, name), kind: kind, ns: ns, name: name, template: tmpl, want: want}
		out = append(out, o)
		return o
	}
	for _, d := range objs.Deployments {
		add(kindDeployment, d.Namespace, d.Name, d.Spec.Template, d.Spec.Replicas).deploy = d
	}
	for _, rs := range objs.ReplicaSets {
		add(kindReplicaSet, rs.Namespace, rs.Name, rs.Spec.Template, rs.Spec.Replicas)
	}
	for _, sts := range objs.StatefulSets {
		add(kindStatefulSet, sts.Namespace, sts.Name, sts.Spec.Template, sts.Spec.Replicas).sts = sts
	}
	for _, j := range objs.Jobs {
		o := add(kindJob, j.Namespace, j.Name, j.Spec.Template, nil)
		o.want, o.parallel = 0, parallelism(j.Spec.Parallelism)
	}
	for _, p := range objs.BarePods {
		tmpl := corev1.PodTemplateSpec{ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: *p.Spec.DeepCopy()}
		o := add(kindPod, p.Namespace, p.Name, tmpl, nil)
		// Where it runs now is the run's start, not its template.
		o.nodeName, o.template.Spec.NodeName = p.Spec.NodeName, ""
	}
	return out
}

// podName is the name of o's next pod: a StatefulSet's lowest missing
// ordinal, a bare Pod's own name, a number otherwise.
func (s *sim) podName(o *owner) string {
	switch o.kind {
	case kindStatefulSet:
		for i := 0; ; i++ {
			if name := o.name + "-" + strconv.Itoa(i); o.pods[o.ns+"/"+name] == nil {
				return name
			}
		}
	case kindPod:
		return o.name
	}
	return fmt.Sprintf("%s-%06d", o.name, s.podSeq)
}

// ordinal is the number of StatefulSet o's pod pod.
func ordinal(o *owner, pod string) int {
	n, _ := strconv.Atoi(pod[len(o.name)+1:])
	return n
}

// reconcile makes o's pods number o.want, as its controller does.
func (s *sim) reconcile(o *owner) {
	switch o.kind {
	case kindJob:
	case kindStatefulSet:
		s.reconcileSet(o)
	case kindDeployment:
		s.reconcileDeployment(o)
	case kindPod:
		if o.want > 0 && len(o.pods) == 0 {
			s.newPod(o)
		}
		if o.want == 0 {
			for _, key := range sortedKeys(o.pods) {
				s.removePod(o.pods[key])
			}
		}
	default:
		s.reconcileReplicas(o)
	}
}

// reconcileSet keeps a StatefulSet's ordinals 0..want-1, as its controller
// does: it deletes the ordinals above, highest first (keeping their claims
// unless persistentVolumeClaimRetentionPolicy.whenScaled is Delete), and
// makes the missing ones lowest first; under OrderedReady (the default) it
// makes one only when every lower ordinal runs, so a set starts one pod at
// a time; then it rolls pods of an older template over.
func (s *sim) reconcileSet(o *owner) {
	var above []*simPod
	for _, key := range sortedKeys(o.pods) {
		if p := o.pods[key]; ordinal(o, p.pod.Name) >= o.want {
			above = append(above, p)
		}
	}
	sort.Slice(above, func(i, j int) bool { return ordinal(o, above[i].pod.Name) > ordinal(o, above[j].pod.Name) })
	for _, p := range above {
		s.removePod(p)
		if pol := o.sts.Spec.PersistentVolumeClaimRetentionPolicy; pol != nil && pol.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			s.deleteClaims(o, p.pod.Name)
		}
	}
	ordered := o.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	for i := 0; i < o.want; i++ {
		p := o.pods[o.ns+"/"+o.name+"-"+strconv.Itoa(i)]
		if p == nil {
			s.newPod(o)
			if ordered {
				return
			}
			continue
		}
		if ordered && p.node == nil {
			return
		}
	}
	// Every ordinal is there: a RollingUpdate (the default) replaces the
	// highest one of an older template once every pod runs, one at a time;
	// OnDelete leaves them. (A roll-out comes only from an apply, and
	// Validate refuses one with a partition or a wider maxUnavailable.)
	if o.sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return
	}
	var stale *simPod
	for _, p := range o.pods {
		if p.node == nil {
			return
		}
		if p.version != o.version && (stale == nil || ordinal(o, p.pod.Name) > ordinal(o, stale.pod.Name)) {
			stale = p
		}
	}
	if stale != nil {
		s.removePod(stale)
		s.newPod(o)
	}
}

// reconcileReplicas makes a ReplicaSet's pods number o.want, as the
// ReplicaSet controller does: it makes new pods, or deletes pending pods
// first, then those on the nodes running the most of o's pods, then the
// newest.
func (s *sim) reconcileReplicas(o *owner) {
	for len(o.pods) < o.want {
		s.newPod(o)
	}
	if len(o.pods) <= o.want {
		return
	}
	all := make([]*simPod, 0, len(o.pods))
	for _, key := range sortedKeys(o.pods) {
		all = append(all, o.pods[key])
	}
	s.deleteFirst(o, all, len(all)-o.want)
}

// applyWorkloads carries out an apply of workloads: a new one starts; a
// changed pod template rolls it over as its controller does; the replicas
// are set.
func (s *sim) applyWorkloads(objs *manifests.Objects) {
	for _, o := range workloadsOf(objs) {
		old := s.owners[o.key]
		if old == nil {
			s.addOwner(o)
			s.reconcile(o)
			continue
		}
		if o.isJob() {
			old.template, old.parallel = o.template, o.parallel
			s.newVersion(old)
			continue
		}
		if !equality.Semantic.DeepEqual(old.template, o.template) {
			old.template = o.template
			s.newVersion(old)
			// A Deployment (reconcileDeployment) and a StatefulSet
			// (reconcileSet) roll over; a ReplicaSet's pods keep their
			// template; a bare Pod is replaced.
			if old.kind == kindPod {
				for _, key := range sortedKeys(old.pods) {
					s.removePod(old.pods[key])
				}
			}
		}
		old.sts, old.deploy = o.sts, o.deploy
		old.want = o.want
		s.reconcile(old)
	}
}

// sortForScaleDown orders a ReplicaSet's pods as its controller deletes
// them: pending first, then those on the nodes running the most of its
// pods, then the newest.
func sortForScaleDown(list []*simPod, perNode map[*simNode]int) {
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
}

// delete carries out a delete event: a workload's pods go at once (their
// graceful termination is not modelled), and so does the workload.
func (s *sim) delete(d Delete) {
	ns, name := splitKey(d.Name)
	if d.Kind == "DaemonSet" {
		s.deleteDaemonSet(d.Name)
		return
	}
	if d.Kind == kindNodePool {
		s.deletePool(d.Name)
		return
	}
	if d.Kind == "PodDisruptionBudget" {
		for i, pdb := range s.pdbs {
			if pdb.Namespace == ns && pdb.Name == name {
				s.pdbs = append(s.pdbs[:i], s.pdbs[i+1:]...)
				break
			}
		}
		s.changed()
		return
	}
	o := s.owners[ownerKey(d.Kind, ns, name)]
	if o == nil {
		return
	}
	for _, key := range sortedKeys(o.pods) {
		s.removePod(o.pods[key])
	}
	// whenDeleted: Delete takes every claim the set made, those its
	// scale-downs kept too.
	if o.sts != nil && o.sts.Spec.PersistentVolumeClaimRetentionPolicy != nil &&
		o.sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		for i := 0; i < o.made; i++ {
			s.deleteClaims(o, o.name+"-"+strconv.Itoa(i))
		}
	}
	delete(s.owners, o.key)
	s.ownerNames = slices.DeleteFunc(s.ownerNames, func(k string) bool { return k == o.key })
	s.changed()
}

// ownerKindOfPod is the kind of the controller in a pod's ownerReferences:
// a Deployment's pods belong to its ReplicaSet.
func ownerKindOfPod(kind string) string {
	if kind == kindDeployment {
		return kindReplicaSet
	}
	return kind
}

func ownerAPIVersion(kind string) string {
	if kind == kindJob {
		return "batch/v1"
	}
	return "apps/v1"
}

// ownedRefused refuses Pods and ReplicaSets that a controller makes: given
// as well as their workload (kubectl get deploy,rs,pods -o yaml gives them
// all), they would run beside the pods it makes.
func ownedRefused(objs *manifests.Objects) error {
	for _, p := range objs.BarePods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			return fmt.Errorf("pod %s/%s: its %s %s makes it; give the workload (its Deployment, StatefulSet, Job or DaemonSet) rather than its pods", p.Namespace, p.Name, ref.Kind, ref.Name)
		}
	}
	for _, rs := range objs.ReplicaSets {
		if ref := metav1.GetControllerOf(rs); ref != nil {
			return fmt.Errorf("replicaset %s/%s: its %s %s makes it; give the %s rather than its ReplicaSets", rs.Namespace, rs.Name, ref.Kind, ref.Name, ref.Kind)
		}
	}
	return nil
}

// newVersion gives o's template a version no template of the run had, and
// keeps it for the pods made from it.
func (s *sim) newVersion(o *owner) {
	s.versions++
	o.version = s.versions
	if o.templates == nil {
		o.templates = map[int]*corev1.PodTemplateSpec{}
	}
	tmpl := o.template
	o.templates[o.version] = &tmpl
}
