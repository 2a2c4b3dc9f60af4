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
		add(kindDeployment, d.Namespace, d.Name, d.Spec.Template, d.Spec.Replicas)
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

// ordinal is a StatefulSet pod's number.
func ordinal(o *owner, p *simPod) int {
	n, _ := strconv.Atoi(p.pod.Name[len(o.name)+1:])
	return n
}

// reconcile makes o's pods number o.want, as its controller does.
func (s *sim) reconcile(o *owner) {
	switch o.kind {
	case kindJob:
	case kindStatefulSet:
		s.reconcileSet(o)
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
// a time.
func (s *sim) reconcileSet(o *owner) {
	var above []*simPod
	for _, p := range o.pods {
		if ordinal(o, p) >= o.want {
			above = append(above, p)
		}
	}
	for _, p := range above {
		s.removePod(p)
		if pol := o.sts.Spec.PersistentVolumeClaimRetentionPolicy; pol != nil && pol.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			s.deleteClaims(p)
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
	perNode := map[*simNode]int{}
	list := make([]*simPod, 0, len(o.pods))
	for _, key := range sortedKeys(o.pods) {
		p := o.pods[key]
		list = append(list, p)
		if p.node != nil {
			perNode[p.node]++
		}
	}
	sortForScaleDown(list, perNode)
	for _, p := range list[:len(list)-o.want] {
		s.removePod(p)
	}
}

// applyWorkloads carries out an apply of workloads: a new one starts; a
// changed pod template rolls every pod over (the old go, new ones come);
// the replicas are set.
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
			s.versions++
			old.version = s.versions
			continue
		}
		if !equality.Semantic.DeepEqual(old.template, o.template) {
			old.template = o.template
			s.versions++
			old.version = s.versions
			for _, key := range sortedKeys(old.pods) {
				s.removePod(old.pods[key])
			}
		}
		old.sts = o.sts
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
