package disruption

import (
	"context"
	"slices"
	"strings"
	"sync"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// underway are the commands being carried out. Commands run beside the
// decision loop, as Karpenter's orchestration queue runs them: a drift
// whose replacements take minutes to initialize must not hold up the
// deletion of empty nodes, nor the next drift the budgets allow. Budgets
// are the only limit on how many run at once: every candidate of a command
// under way counts as disrupting from the moment it is chosen.
type underway struct {
	mu sync.Mutex
	// claims maps each candidate NodeClaim of a command under way to its
	// node.
	claims  map[string]node
	running sync.WaitGroup
}

// node is a candidate's node, and how many replacements its command
// launches.
type node struct {
	name         string
	replacements int
}

// add registers a command's candidates; they are no longer candidates of
// later decisions, and count against their pools' budgets.
func (u *underway) add(cmd disruption.Command) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.claims == nil {
		u.claims = map[string]node{}
	}
	for _, c := range cmd.Candidates {
		u.claims[c.NodeClaim] = node{c.Node, len(cmd.Replacements)}
	}
}

// done forgets a command's candidates once it has finished.
func (u *underway) done(cmd disruption.Command) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range cmd.Candidates {
		delete(u.claims, c.NodeClaim)
	}
}

// has reports a NodeClaim that is a candidate of a command under way.
func (u *underway) has(claim string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.claims[claim]
	return ok
}

// replaces reports a replacement launched by a command under way: its
// annotation names that command's candidates.
func (u *underway) replaces(nc *v1.NodeClaim) bool {
	replacing, ok := nc.Annotations[v1.AnnotationReplacing]
	return ok && slices.ContainsFunc(strings.Split(replacing, ","), u.has)
}

// nodes are the candidates of the commands under way, less those of
// except, by NodeClaim.
func (u *underway) nodes(except *disruption.Command) map[string]node {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]node, len(u.claims))
	for claim, n := range u.claims {
		out[claim] = n
	}
	if except != nil {
		for _, c := range except.Candidates {
			delete(out, c.NodeClaim)
		}
	}
	return out
}

// withUnderway is snap with the candidates of the commands under way (but
// except) on their way out: those nodes take no new pods. The pods of a
// deletion's candidates are pending, keeping their claim on the room they
// will take elsewhere: a decision or recheck that counted that room free
// would plan two commands' pods into it. So are those of a replacement's
// candidates once all its replacements have initialized: kept on their
// nodes until the candidates are deleted, they left the replacements
// looking empty, and a pass in that window planned another drift's pods
// into them (or deleted one as empty). While the replacements launch, those
// pods stay put: their room is the replacements', which no other command
// counts on yet, and as pending pods they would claim any initialized
// node's room first (an empty node would stop looking empty).
func (c *Controller) withUnderway(ctx context.Context, snap scheduling.Snapshot, except *disruption.Command) (scheduling.Snapshot, error) {
	underway := c.underway.nodes(except)
	if len(underway) == 0 {
		return snap, nil
	}
	claims, err := c.Cluster.NodeClaims(ctx)
	if err != nil {
		return snap, err
	}
	up := initializedReplacements(claims)
	nodes, moving := map[string]bool{}, map[string]bool{}
	for claim, n := range underway {
		nodes[n.name] = true
		moving[n.name] = up[claim] >= n.replacements
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.Client.List(ctx, &pdbs); err != nil {
		return snap, err
	}
	return state.Disrupting(snap, nodes, moving, pdbs.Items, c.Clock.Now()), nil
}

// initializedReplacements counts, for each NodeClaim being replaced, its
// replacements that have initialized and are not being deleted.
func initializedReplacements(claims []*v1.NodeClaim) map[string]int {
	out := map[string]int{}
	for _, nc := range claims {
		replacing, ok := nc.Annotations[v1.AnnotationReplacing]
		if !ok || nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		for _, name := range strings.Split(replacing, ",") {
			out[name]++
		}
	}
	return out
}

// start carries out cmd beside the decision loop. The command's result
// comes on the channel returned, once it has finished and been forgotten.
func (c *Controller) start(ctx context.Context, cmd disruption.Command, byNode map[string]*candidateInfo) <-chan error {
	c.underway.add(cmd)
	c.underway.running.Add(1)
	out := make(chan error, 1)
	go func() {
		defer c.underway.running.Done()
		err := c.execute(ctx, cmd, byNode)
		c.underway.done(cmd)
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "disruption failed", "reason", strings.ToLower(string(cmd.Reason)))
		}
		out <- err
	}()
	return out
}

// Wait returns once every command under way has finished.
func (c *Controller) Wait() { c.underway.running.Wait() }
