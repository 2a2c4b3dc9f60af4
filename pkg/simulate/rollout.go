package simulate

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A Deployment whose template changes rolls over as its controller rolls
// it: under RollingUpdate (the default) at most maxSurge pods above its
// replicas, and at most maxUnavailable of them not available, each 25% by
// default; under Recreate every old pod goes before a new one is made.
// How fast a roll-out goes is what it costs: the surge is nodes the
// provisioner launches, and the pace is set by how fast new pods start,
// which is launch and registration time when no node has room.

// fenceposts are a rolling Deployment's surge and unavailability for
// replicas, as the Deployment controller resolves them: the surge rounded
// up, the unavailability rounded down, and one pod unavailable when both
// come to nothing, so that a roll-out still moves.
func fenceposts(d *appsv1.Deployment, replicas int) (surge, unavailable int) {
	quarter := intstr.FromString("25%")
	maxSurge, maxUnavailable := &quarter, &quarter
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			maxSurge = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			maxUnavailable = ru.MaxUnavailable
		}
	}
	// Validate refused values that do not parse.
	surge, _ = intstr.GetScaledValueFromIntOrPercent(maxSurge, replicas, true)
	unavailable, _ = intstr.GetScaledValueFromIntOrPercent(maxUnavailable, replicas, false)
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

// available is whether p counts toward its Deployment's availability: it
// runs, and has run for the Deployment's minReadySeconds.
func (s *sim) available(p *simPod) bool {
	if p.node == nil {
		return false
	}
	if d := p.owner.deploy; d != nil && d.Spec.MinReadySeconds > 0 {
		return !s.now.Before(p.pod.Status.StartTime.Add(time.Duration(d.Spec.MinReadySeconds) * time.Second))
	}
	return true
}

// rolling is whether o is a Deployment with pods of an older template.
func (o *owner) rolling() bool {
	if o.deploy == nil {
		return false
	}
	for _, p := range o.pods {
		if p.version != o.version {
			return true
		}
	}
	return false
}

// reconcileDeployment keeps a Deployment's pods as its controller and its
// ReplicaSets do. Without pods of an older template it is one ReplicaSet.
// In a roll-out, new pods are made while the total stays within the
// surge, and old ones deleted while the available stay within the
// unavailability: first old pods that are not available, then the rest in
// the ReplicaSet controller's order.
func (s *sim) reconcileDeployment(o *owner) {
	if !o.rolling() {
		s.reconcileReplicas(o)
		return
	}
	if o.deploy.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		for _, p := range s.oldPods(o) {
			s.removePod(p)
		}
		s.reconcileReplicas(o)
		return
	}
	// The controller syncs again whenever its ReplicaSets change, so a
	// step is repeated until it changes nothing.
	for s.rollStep(o) {
	}
	// Once every old pod is gone, the replicas are the new ReplicaSet's.
	if !o.rolling() {
		s.reconcileReplicas(o)
	}
}

// rollStep is one sync of a rolling Deployment: it reports whether it
// made or deleted a pod.
func (s *sim) rollStep(o *owner) bool {
	seq, count := s.podSeq, len(o.pods)
	surge, unavailable := fenceposts(o.deploy, o.want)
	// Scaled below the pods it has mid-roll: the old go first.
	if excess := len(o.pods) - (o.want + surge); excess > 0 {
		s.deleteFirst(o, s.oldPods(o), excess)
	}
	fresh := len(o.pods) - len(s.oldPods(o))
	for range min(o.want-fresh, o.want+surge-len(o.pods)) {
		s.newPod(o)
	}
	minAvailable := o.want - unavailable
	freshUnavailable, availableNow := 0, 0
	for _, p := range o.pods {
		switch {
		case s.available(p):
			availableNow++
		case p.version == o.version:
			freshUnavailable++
		}
	}
	// Old pods that are not available go first, as long as the roll-out
	// can still reach its replicas once the new pods start.
	if down := len(o.pods) - minAvailable - freshUnavailable; down > 0 {
		var idle []*simPod
		for _, p := range s.oldPods(o) {
			if !s.available(p) {
				idle = append(idle, p)
			}
		}
		s.deleteFirst(o, idle, min(down, len(idle)))
	}
	if down := availableNow - minAvailable; down > 0 {
		old := s.oldPods(o)
		s.deleteFirst(o, old, min(down, len(old)))
	}
	// A pod made moves the sequence; one deleted alone, the count.
	return o.rolling() && (s.podSeq != seq || len(o.pods) != count)
}

// oldPods are o's pods of an older template, by key.
func (s *sim) oldPods(o *owner) []*simPod {
	var out []*simPod
	for _, key := range sortedKeys(o.pods) {
		if p := o.pods[key]; p.version != o.version {
			out = append(out, p)
		}
	}
	return out
}

// deleteFirst deletes the first n of list (all of it when it has fewer)
// in the order the ReplicaSet controller scales down.
func (s *sim) deleteFirst(o *owner, list []*simPod, n int) {
	n = min(n, len(list))
	if n <= 0 {
		return
	}
	perNode := map[*simNode]int{}
	for _, p := range o.pods {
		if p.node != nil {
			perNode[p.node]++
		}
	}
	list = append([]*simPod(nil), list...)
	sortForScaleDown(list, perNode)
	for _, p := range list[:n] {
		s.removePod(p)
	}
}

// deploymentRefused names what of a Deployment the run cannot carry out,
// with the fix, or is empty: a surge or unavailability that does not
// parse, which the API server refuses too, and, applied during a run, a
// paused Deployment, whose roll-out waits for an unpause that is not
// modelled. (Given with -f, a paused Deployment only scales, which is
// modelled.)
func deploymentRefused(d *appsv1.Deployment, applied bool) string {
	if applied && d.Spec.Paused {
		return "spec.paused: a paused Deployment is not modelled; unpause it or leave it out"
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		for i, v := range []*intstr.IntOrString{ru.MaxSurge, ru.MaxUnavailable} {
			if v == nil {
				continue
			}
			if _, err := intstr.GetScaledValueFromIntOrPercent(v, 100, true); err != nil {
				return "spec.strategy.rollingUpdate." + []string{"maxSurge", "maxUnavailable"}[i] + ": " + err.Error() + "; give a count or a percentage such as 25%"
			}
		}
	}
	return ""
}
