package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// pin places pending pods back on the nodes an earlier plan put them on
// (Snapshot.Nominated), before any other placement. Without it, every batch
// while launched nodes boot plans the same pods afresh over those nodes,
// one pod at a time; that packing is looser than the plan the nodes were
// sized for, and the pods it leaves over get NodeClaims of their own. On
// the scale test's 10,000 pods the second batch asked for 144 more nodes
// over the 1,107 in flight; with the pins, 15 to 55 (docs/benchmarks.md §7,
// where what is left comes from kube-scheduler's own placements).
//
// A pin is an ordinary placement, checked as any other: a pod that no
// longer fits where it was nominated (kube-scheduler put other pods there,
// the node is being deleted) is left for the passes that follow. Spread and
// affinity may refuse a pin until others of the batch land, so pins are
// tried pass after pass until one places nothing; it returns how many
// passes that took.
func (s *solver) pin(nominated map[string]string) (passes int) {
	if len(nominated) == 0 || len(s.existing) == 0 {
		return 0
	}
	byName := make(map[string]*node, len(s.existing))
	for _, n := range s.existing {
		byName[n.name] = n
	}
	type target struct {
		pod  *corev1.Pod
		node *node
		// rank counts the group's pins on the node before this one.
		rank int
	}
	pins := map[*podGroup][]target{}
	for _, pg := range s.groups {
		if pg.err != nil {
			continue
		}
		rank := map[*node]int{}
		for _, pod := range pg.pods {
			if n := byName[nominated[pod.Namespace+"/"+pod.Name]]; n != nil {
				pins[pg] = append(pins[pg], target{pod, n, rank[n]})
				rank[n]++
			}
		}
		// Each node's pins spread evenly over the group's, the node with
		// ten pins taking one in every tenth place and that with five one
		// in every fifth: a spread's domains then fill side by side, and
		// few pins wait for another pass.
		ts := pins[pg]
		at := func(t target) float64 { return (float64(t.rank) + 0.5) / float64(rank[t.node]) }
		sort.SliceStable(ts, func(i, j int) bool { return at(ts[i]) < at(ts[j]) })
	}
	for progress := true; progress; {
		progress = false
		for _, pg := range s.groups {
			left := pins[pg][:0]
			for _, t := range pins[pg] {
				if pc := s.firstVariant(pg, t.node); pc != nil {
					s.commitPod(pg, pc, t.node, t.pod)
					progress = true
					continue
				}
				left = append(left, t)
			}
			pins[pg] = left
		}
		if progress {
			passes++
		}
	}
	return passes
}

// firstVariant is the strictest of the group's constraints under which n
// takes one of its pods, or nil.
func (s *solver) firstVariant(pg *podGroup, n *node) *podConstraints {
	for _, pc := range pg.variants {
		if s.check(pg, pc, n) == nil {
			return pc
		}
	}
	return nil
}

// commitPod commits a given pod of the group rather than its next: the
// group's pending pods are the tail of pg.pods, and the one placed leaves
// the tail's head, so the pod moves there first.
func (s *solver) commitPod(pg *podGroup, pc *podConstraints, n *node, pod *corev1.Pod) {
	next := len(pg.pods) - pg.remaining
	for i := next; i < len(pg.pods); i++ {
		if pg.pods[i] == pod {
			pg.pods[i], pg.pods[next] = pg.pods[next], pg.pods[i]
			break
		}
	}
	s.commit(pg, pc, n, pod)
}
