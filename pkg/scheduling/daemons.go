package scheduling

import (
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
)

// daemon is a DaemonSet's pod template as the solver matches it against
// nodes: a node runs one of its pods, and gives up its requests, when the
// node's labels satisfy the nodeSelector together with one of the required
// node-affinity terms, and the pod tolerates the node's taints.
type daemon struct {
	requests    resources.Resources
	tolerations []corev1.Toleration
	// terms are the nodeSelector merged into each required node-affinity
	// term; any one satisfied is enough. One term when there is no affinity.
	terms []requirements.Requirements
}

// buildDaemons analyses the DaemonSets once per solve. A DaemonSet whose
// selector cannot be parsed runs nowhere, as the DaemonSet controller
// would schedule none of its pods. One whose pods claim DRA devices is
// left out, as Karpenter leaves it out: where its devices exist is not
// modelled, so no room is kept for it.
func buildDaemons(in []*corev1.Pod) []*daemon {
	out := make([]*daemon, 0, len(in))
	for _, d := range in {
		if pods.HasResourceClaims(d) {
			continue
		}
		sel := requirements.Requirements{}
		for k, v := range d.Spec.NodeSelector {
			sel.Add(requirements.In(requirements.NormalizeKey(k), v))
		}
		dm := &daemon{requests: resources.PodRequests(d), tolerations: d.Spec.Tolerations}
		if a := d.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				r, err := nodeSelectorTermRequirements(term)
				if err == nil {
					dm.terms = append(dm.terms, sel.Merge(r))
				}
			}
			if len(dm.terms) == 0 {
				continue
			}
		} else {
			dm.terms = []requirements.Requirements{sel}
		}
		out = append(out, dm)
	}
	return out
}

// toleratesAll reports whether the daemon's pods may run despite taints.
// Only NoSchedule and NoExecute taints keep a pod off a node.
func (d *daemon) toleratesAll(taints []corev1.Taint) bool {
	pg := podGroup{tolerations: d.tolerations}
	return pg.untolerated(taints, true) == nil
}

// runsOn reports whether the daemon's pods would run on a node whose labels
// can be what both a and b allow (b may be nil).
func (d *daemon) runsOn(a, b requirements.Requirements) bool {
	for _, term := range d.terms {
		if labelsCompatible(a, b, term) == nil {
			return true
		}
	}
	return false
}

// managedLabels are labels every node Joiner launches carries once it
// joins; DaemonSets selecting them run on it. A NodeClaim's requirements
// do not list them, so they are added for the match.
var managedLabels = requirements.LabelRequirements(map[string]string{v1.LabelNodeRegistered: "true", v1.LabelNodeInitialized: "true"})

// poolDaemons are the DaemonSets whose pods tolerate the pool's taints.
// Only spec.taints count: startup taints are removed once the node is up,
// and DaemonSet pods (CNI, kube-proxy) are usually what removes them.
func poolDaemons(daemons []*daemon, p *pool) []*daemon {
	var out []*daemon
	for _, d := range daemons {
		if d.toleratesAll(p.taints) {
			out = append(out, d)
		}
	}
	return out
}

// typeOverhead is what the DaemonSets take on a new node of pool p and an
// instance type with labels typeReqs: the pool's requirements and labels
// alone miss the labels only the instance type sets, such as
// kubernetes.io/os, which most node agents select.
func typeOverhead(daemons []*daemon, poolReqs, typeReqs requirements.Requirements) resources.Resources {
	var total resources.Resources
	if len(daemons) == 0 {
		return total
	}
	merged := typeReqs.Copy()
	for k, r := range managedLabels {
		merged[k] = r
	}
	for _, d := range daemons {
		if d.runsOn(poolReqs, merged) {
			total = total.Add(d.requests)
		}
	}
	return total
}

// pendingDaemons is the room an in-flight node still owes its DaemonSets:
// the requests of those that will run on it, less what DaemonSet pods
// already bound there use. The pods land once the node registers, before
// anything pending can, so planning them onto that room would overfill it.
// Counting in aggregate rather than per DaemonSet follows Karpenter.
func pendingDaemons(daemons []*daemon, in *Node, taints []corev1.Taint) resources.Resources {
	labels := requirements.LabelRequirements(in.Labels)
	for k, r := range managedLabels {
		if _, ok := labels[k]; !ok {
			labels[k] = r
		}
	}
	var want resources.Resources
	for _, d := range daemons {
		if d.toleratesAll(taints) && d.runsOn(labels, nil) {
			want = want.Add(d.requests)
		}
	}
	for _, pod := range in.Pods {
		if pods.IsOwnedByDaemonSet(pod) {
			want = want.Sub(resources.PodRequests(pod))
		}
	}
	return want.NonNegative()
}

// labelsCompatible reports why a node whose label values can be anything
// both a and b allow (b nil: only a) cannot satisfy the predicates pred.
// A key neither defines is a label the node will not carry.
func labelsCompatible(a, b, pred requirements.Requirements) error {
	for k, p := range pred {
		if err := keyCompatible(a, b, k, p); err != nil {
			return err
		}
	}
	return nil
}

// keyCompatible is labelsCompatible for one predicate.
func keyCompatible(a, b requirements.Requirements, k string, p *requirements.Requirement) error {
	r, ok := a[k]
	if t, tok := b[k]; tok {
		if ok {
			r = r.Intersect(t)
		} else {
			r, ok = t, true
		}
	}
	if !ok || r.Empty() {
		if p.AbsentOK() {
			return nil
		}
		return requirements.NotOffered(k, p)
	}
	if !r.Intersects(p) {
		return requirements.Incompatible(p, r)
	}
	return nil
}

// DaemonOverhead is what the DaemonSets (daemonSets, one pod of each) that
// run on n request there and n.Pods do not already hold: the room their
// pods take as soon as the node is up. The simulator, whose nodes carry
// no DaemonSet pods, takes it from what its kube-scheduler may bind.
func DaemonOverhead(daemonSets []*corev1.Pod, n *Node) resources.Resources {
	return pendingDaemons(buildDaemons(daemonSets), n, n.Taints)
}
