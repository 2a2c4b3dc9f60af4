package simulate

import (
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// command is a disruption under way: its replacements launching, then its
// candidates drained.
type command struct {
	cmd          disruption.Command
	replacements []*simNode
	// marked: the candidates are tainted and take no new pods.
	marked bool
}

// queuePass runs a disruption pass at the next poll, once. A pass that
// changes nothing is not repeated until something changes or a node
// becomes consolidatable: its decision would be the same.
func (s *sim) queuePass() {
	if s.passQueued {
		return
	}
	s.passQueued = true
	poll := s.cfg.Timing.DisruptionPoll
	next := s.start.Add(s.now.Sub(s.start).Truncate(poll) + poll)
	s.at(next, s.pass)
}

// pass is one round of the disruption controller: candidates as its read
// builds them, budgets, and disruption.Decide.
func (s *sim) pass() {
	s.passQueued = false
	if !s.dirty {
		return
	}
	s.dirty = false
	s.reconcileStatic()
	pending := s.pendingPods()
	snap := s.snapshot(pending)
	// The commands under way: their candidates take no pods, and once
	// their replacements are up their pods count as moving.
	underway, moving := s.underwayBut(nil)
	pdbs := s.pdbStatus()
	if len(underway) > 0 {
		snap = state.Disrupting(snap, underway, moving, pdbs, s.now)
	}
	// A nomination protects a node while the pods still wait for it to
	// come up; once it has, kube-scheduler binds them or they go back to
	// the provisioner, as the controller's nominations lapse.
	waiting := map[string][]string{}
	for _, p := range pending {
		if n := s.nodes[p.nominated]; n != nil && !n.initialized() {
			waiting[p.nominated] = append(waiting[p.nominated], p.key)
		}
	}
	opts := disruption.Options{SpotToSpot: s.cfg.SpotToSpot, Scheduling: s.cfg.Scheduling, Saving: s.saving()}
	var cands []disruption.Candidate
	var budget []disruption.BudgetNode
	for _, n := range s.liveNodes() {
		budget = append(budget, disruption.BudgetNode{NodePool: n.pool, Initialized: n.initialized(), Ready: n.initialized(),
			MarkedForDeletion: n.deleting || n.underway != nil})
		if !n.initialized() || n.deleting || n.underway != nil {
			continue
		}
		pool := s.pools[n.pool]
		c := disruption.Candidate{Node: n.name, NodeClaim: n.name, NodePool: n.pool, InstanceType: n.it.Name,
			CapacityType: n.offering.CapacityType, Zone: n.offering.Zone, Price: n.offering.Price, DriftedSince: n.drifted}
		// Under commitments a candidate's price is what the bill saves
		// when it goes, as the controller prices it.
		if opts.Saving != nil {
			c.Price = opts.Saving([]string{n.name})
		}
		if after := pool.Spec.Disruption.ConsolidateAfter; !after.IsNever() {
			since := n.lastEvent
			if n.readyAt.After(since) {
				since = n.readyAt
			}
			at := since.Add(*after.Duration)
			c.Consolidatable = !s.now.Before(at)
			if !c.Consolidatable {
				// Decide again when it becomes consolidatable.
				s.at(at, func() { s.changed() })
			}
		}
		var onNode []*corev1.Pod
		for _, key := range sortedKeys(n.pods) {
			onNode = append(onNode, n.pods[key].pod)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}}
		c.Blocked = disruption.Protected(c, node, onNode, pdbs, waiting[n.name], s.now)
		c.Forceable = c.Blocked != "" && pool.Spec.Template.Spec.TerminationGracePeriod != nil &&
			disruption.Protected(c, node, nil, nil, waiting[n.name], s.now) == ""
		cands = append(cands, c)
	}
	var pools []*v1.NodePool
	for _, name := range sortedKeys(s.pools) {
		pools = append(pools, s.pools[name])
	}
	// Budgets that cannot be read were refused at start.
	_ = opts.SetBudgets(pools, disruption.CountBudgets(budget), s.now)
	s.rec.passes++
	if len(cands) == 0 {
		return
	}
	d := disruption.Decide(snap, cands, opts)
	s.rec.blocked(d.Skipped)
	if len(d.Commands) == 0 {
		return
	}
	s.startCommand(d.Commands[0])
	// Commands run beside each other: the next poll decides again.
	s.changed()
}

// startCommand carries a command out as the controller's execute does:
// a deletion waits ValidationDelay; a replacement launches its nodes and
// drains the candidates once they are initialized.
func (s *sim) startCommand(cmd disruption.Command) {
	c := &command{cmd: cmd}
	s.commands = append(s.commands, c)
	for _, cand := range cmd.Candidates {
		s.nodes[cand.Node].underway = c
	}
	s.rec.decided(s.now, cmd)
	if len(cmd.Replacements) == 0 {
		s.after(s.cfg.Timing.ValidationDelay, func() { s.drainCommand(c) })
		return
	}
	c.marked = true
	for _, r := range cmd.Replacements {
		n := s.launch(r, "replacement")
		if n == nil {
			s.abandon(c)
			return
		}
		c.replacements = append(c.replacements, n)
	}
	s.after(s.cfg.Timing.Launch+s.cfg.Timing.Initialize, func() { s.drainCommand(c) })
}

// drainCommand evicts the candidates' pods and terminates them.
func (s *sim) drainCommand(c *command) {
	for _, r := range c.replacements {
		if r.gone || r.deleting {
			// A replacement interrupted or expired before it
			// initialized: the controller's wait for it fails, and the
			// command is abandoned.
			s.abandon(c)
			return
		}
	}
	cands := c.cmd.Candidates
	// Tainted first, as the controller taints a deletion's candidates
	// before its recheck: pending pods then claim no room on them.
	c.marked = true
	if len(c.cmd.Replacements) == 0 {
		// Pods that arrived meanwhile may have taken the room: check
		// again, as the controller's recheck does.
		snap := s.snapshot(s.pendingPods())
		if others, moving := s.underwayBut(c); len(others) > 0 {
			snap = state.Disrupting(snap, others, moving, s.pdbStatus(), s.now)
		}
		goes, _ := disruption.Recheck(snap, c.cmd, s.cfg.Scheduling)
		for _, cand := range cands[goes:] {
			s.nodes[cand.Node].underway = nil
		}
		if goes < len(cands) {
			// The nodes kept back are candidates again.
			s.changed()
		}
		cands = cands[:goes]
	}
	reason := strings.ToLower(string(c.cmd.Reason))
	for _, cand := range cands {
		n := s.nodes[cand.Node]
		if n.deleting || n.gone {
			// Interrupted or expired while the command waited: counted
			// and drained already.
			continue
		}
		s.rec.disrupted(reason)
		s.drain(n, reason)
	}
	s.finish(c)
}

func (s *sim) abandon(c *command) {
	for _, cand := range c.cmd.Candidates {
		s.nodes[cand.Node].underway = nil
	}
	// The replacements already launched go, as the controller's
	// dropReplacements deletes them.
	for _, r := range c.replacements {
		s.terminate(r)
	}
	s.finish(c)
	s.changed()
}

func (s *sim) finish(c *command) {
	for i, x := range s.commands {
		if x == c {
			s.commands = append(s.commands[:i], s.commands[i+1:]...)
			break
		}
	}
}

// drain evicts n's pods (not DaemonSets') and terminates n after Drain.
func (s *sim) drain(n *simNode, reason string) {
	if n.deleting {
		return
	}
	n.deleting = true
	for _, key := range sortedKeys(n.pods) {
		if p := n.pods[key]; !pods.IsOwnedByNode(p.pod) {
			s.evict(p, reason)
		}
	}
	s.changed()
	s.after(s.cfg.Timing.Drain, func() { s.terminate(n) })
}

// terminate ends n's instance; its cost stops.
func (s *sim) terminate(n *simNode) {
	if n.gone {
		return
	}
	n.gone = true
	s.live--
	s.rec.terminated(n, s.now)
	s.billChanged()
	for _, p := range n.pods {
		p.node = nil
	}
	s.changed()
	// Pods nominated to it are the provisioner's again.
	if len(s.pendingPods()) > 0 {
		s.pendingAdded()
	}
}

// expire replaces n once its NodePool's expireAfter has passed: forceful,
// not subject to budgets, as in Karpenter.
func (s *sim) expire(n *simNode) {
	if n.gone || n.deleting {
		return
	}
	s.rec.disrupted("expired")
	s.drain(n, "expired")
}

// interrupt is a spot interruption warning: Joiner drains the node at
// once, and terminates it when drained, within the two minutes' notice.
func (s *sim) interrupt(n *simNode) {
	if n.gone || n.deleting {
		return
	}
	s.rec.disrupted("interrupted")
	s.drain(n, "interrupted")
}

// pdbStatus is the PDBs with status.disruptionsAllowed as the disruption
// controller computes it from the pods that are running.
func (s *sim) pdbStatus() []policyv1.PodDisruptionBudget {
	out := make([]policyv1.PodDisruptionBudget, 0, len(s.pdbs))
	for _, pdb := range s.pdbs {
		cp := *pdb.DeepCopy()
		expected, healthy := 0, 0
		for _, key := range sortedKeys(s.pods) {
			p := s.pods[key]
			if len(pods.PDBsOf(p.pod, []policyv1.PodDisruptionBudget{cp})) == 0 {
				continue
			}
			expected++
			if p.node != nil && p.node.initialized() {
				healthy++
			}
		}
		allowed := 0
		switch {
		case cp.Spec.MinAvailable != nil:
			min, _ := intstr.GetScaledValueFromIntOrPercent(cp.Spec.MinAvailable, expected, true)
			allowed = healthy - min
		case cp.Spec.MaxUnavailable != nil:
			max, _ := intstr.GetScaledValueFromIntOrPercent(cp.Spec.MaxUnavailable, expected, true)
			allowed = max - (expected - healthy)
		}
		if allowed < 0 {
			allowed = 0
		}
		cp.Status.DisruptionsAllowed = int32(allowed)
		out = append(out, cp)
	}
	return out
}

// markDrift marks the nodes of pool drifted once its template or its
// EC2NodeClass changed (classPrint), or its requirements no longer admit
// them.
func (s *sim) markDrift(pool string) {
	np := s.pools[pool]
	for _, n := range s.liveNodes() {
		if n.pool != pool || !n.drifted.IsZero() {
			continue
		}
		if n.hash != s.poolHash[pool] || n.classPrint != s.classPrints[s.classOf(pool)] || !admits(np, n.labels) {
			n.drifted = s.now
			s.changed()
		}
	}
}

// underwayBut are the candidates of the commands under way but except,
// and which of them are moving: those whose replacements have all
// initialized, as the controller's withUnderway has them.
func (s *sim) underwayBut(except *command) (nodes, moving map[string]bool) {
	nodes, moving = map[string]bool{}, map[string]bool{}
	for _, c := range s.commands {
		if c == except {
			continue
		}
		up := true
		for _, r := range c.replacements {
			up = up && r.initialized()
		}
		for _, cand := range c.cmd.Candidates {
			nodes[cand.Node] = true
			moving[cand.Node] = up
		}
	}
	return nodes, moving
}

// admits reports whether np's requirements still admit a node with labels.
func admits(np *v1.NodePool, labels map[string]string) bool {
	reqs, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...)
	return err == nil && requirements.LabelsCompatible(labels, reqs) == nil
}
