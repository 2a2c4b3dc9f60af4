package simulate

import (
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	appsv1 "k8s.io/api/apps/v1"
)

// DaemonSets. Their pods are not simulated one by one: each node carries
// the overhead of the DaemonSets that select it (scheduling.DaemonOverhead),
// as the planner counts it. A DaemonSet applied or deleted mid-run changes
// every node's overhead at once, as the DaemonSet controller starts or
// stops its pod on each node, and the plans, the bound and kube-scheduler
// see the new overhead from then on. A node the new overhead overfills
// keeps its pods (the kubelet does not evict for it); it takes no more.

// applyDaemonSets adds dss, or replaces the DaemonSets of their names.
func (s *sim) applyDaemonSets(dss []*appsv1.DaemonSet) {
	for _, ds := range dss {
		s.daemonSetObjs[ds.Namespace+"/"+ds.Name] = ds
	}
	s.daemonSetsChanged()
}

// deleteDaemonSet removes the DaemonSet NAMESPACE/NAME.
func (s *sim) deleteDaemonSet(key string) {
	delete(s.daemonSetObjs, key)
	s.daemonSetsChanged()
}

// daemonSetsChanged works out the DaemonSets' pods again, by name, and
// invalidates what was worked out from the old ones.
func (s *sim) daemonSetsChanged() {
	s.daemonSets = nil
	for _, key := range sortedKeys(s.daemonSetObjs) {
		s.daemonSets = append(s.daemonSets, pods.WithLimitRanges(pods.DaemonSetPod(s.daemonSetObjs[key]), s.cfg.Objects.LimitRanges))
	}
	s.daemonGen++
	s.workloadChanged()
	s.changed()
	s.queueBind()
}
