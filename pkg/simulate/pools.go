package simulate

// kindNodePool is a NodePool in a delete event. It is cluster-scoped, so
// the event names it without a namespace.
const kindNodePool = "NodePool"

// deletedReason is what a deleted NodePool's nodes are counted under, in
// disruptions and evictions, beside Karpenter's disruption reasons: their
// pods move for the same reason a consolidation's do, so the report shows
// them with the rest.
const deletedReason = "deleted"

// deletePool deletes NodePool name as the API server's garbage collector
// and Karpenter's termination do: its NodeClaims, owned by it, are deleted
// with it, launching or running, each drained and then terminated, and no
// replacement is launched for them, as none is for a NodeClaim deleted by
// hand. Its pods wait for room in the other pools. A command under way
// whose replacements were the pool's is abandoned when they go, as the
// controller's wait for them fails.
func (s *sim) deletePool(name string) {
	if s.pools[name] == nil {
		return
	}
	delete(s.pools, name)
	delete(s.poolHash, name)
	s.workloadChanged()
	s.refreshTypes()
	for _, n := range s.liveNodes() {
		if n.pool == name && !n.deleting {
			s.rec.disrupted(deletedReason)
			s.drain(n, deletedReason)
		}
	}
	s.changed()
}
