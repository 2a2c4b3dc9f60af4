package scheduling

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
)

// Volumes. Where a pod's volumes let it run is already in its required node
// affinity (see volumes.WithTopology), so the solver only counts
// attachments: a node takes no more volumes of a CSI driver than its limit,
// from its CSINode for a running node and from its instance type for a new
// one. Two pods that share a claim attach it once.

// volumeState is the solver's view of pod volumes.
type volumeState struct {
	byPod map[string]volumes.Usage
	// limited are the drivers with a limit on some node or instance type;
	// attachments of other drivers cannot matter and are not tracked.
	limited map[string]bool
}

// nodeAttachments are the volumes a node attaches. Both maps change only
// through bump, so trials roll them back.
type nodeAttachments struct {
	// limits per driver of an existing node; a new node uses its type's.
	limits map[string]int
	// users counts the pods on the node using each volume.
	users map[string]int
	// count is the distinct volumes per driver.
	count map[string]int
}

func newVolumeState(snap Snapshot) volumeState {
	vs := volumeState{byPod: snap.Volumes, limited: map[string]bool{}}
	for _, n := range snap.Nodes {
		for d := range n.AttachLimits {
			vs.limited[d] = true
		}
	}
	for _, p := range snap.NodePools {
		for _, it := range p.InstanceTypes {
			for d := range it.AttachLimits {
				vs.limited[d] = true
			}
		}
	}
	return vs
}

// usageOf is pod's entry in a snapshot's Volumes; without volumes it
// builds no key.
func usageOf(vols map[string]volumes.Usage, pod *corev1.Pod) (volumes.Usage, bool) {
	if len(vols) == 0 {
		return volumes.Usage{}, false
	}
	u, ok := vols[pod.Namespace+"/"+pod.Name]
	return u, ok
}

// limitedOnly keeps the attachments of drivers with a limit.
func (vs volumeState) limitedOnly(atts []volumes.Attachment) []volumes.Attachment {
	var out []volumes.Attachment
	for _, a := range atts {
		if vs.limited[a.Driver] {
			out = append(out, a)
		}
	}
	return out
}

// podVolumes returns the pod's attachments that count against a limit, and
// its volume problem.
func (s *solver) podVolumes(pod *corev1.Pod) ([]volumes.Attachment, string) {
	pv, ok := usageOf(s.volumes.byPod, pod)
	if !ok {
		return nil, ""
	}
	return s.volumes.limitedOnly(pv.Attachments), pv.Problem
}

// volumeKey separates pods whose volumes differ into groups of their own:
// a group's pods then attach the same volumes, so one check serves them all.
func (s *solver) volumeKey(pod *corev1.Pod) string {
	atts, problem := s.podVolumes(pod)
	if len(atts) == 0 && problem == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("|volumes")
	for _, a := range atts {
		b.WriteString("|" + a.Driver + "=" + a.Handle)
	}
	if problem != "" {
		b.WriteString("|problem=" + problem)
	}
	return b.String()
}

// analyzeVolumes sets the group's attachments, or its error when the
// volumes of its pods cannot be resolved.
func (s *solver) analyzeVolumes(pg *podGroup, pod *corev1.Pod) {
	atts, problem := s.podVolumes(pod)
	pg.attachments = atts
	if problem != "" && pg.err == nil {
		pg.err = errors.New(problem)
	}
}

// attachExisting records what an existing node attaches and may attach,
// from atts, the attachments of its pods.
func (s *solver) attachExisting(n *node, in *Node, atts []volumes.Attachment) {
	if len(in.AttachLimits) > 0 {
		n.attach = &nodeAttachments{limits: in.AttachLimits, users: map[string]int{}, count: map[string]int{}}
	}
	s.attachTo(n, s.volumes.limitedOnly(atts))
}

// attachLimit is the node's limit for driver, or -1 for none.
func (n *node) attachLimit(driver string) int {
	var limits map[string]int
	switch {
	case n.existing && n.attach != nil:
		limits = n.attach.limits
	case !n.existing && n.target != nil:
		limits = n.target.it.AttachLimits
	}
	if l, ok := limits[driver]; ok {
		return l
	}
	return -1
}

// newAttachments counts, per driver, the volumes of atts that n does not
// attach yet.
func (n *node) newAttachments(atts []volumes.Attachment) map[string]int {
	var out map[string]int
	for _, a := range atts {
		if n.attach != nil && n.attach.users[attachKey(a)] > 0 {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[a.Driver]++
	}
	return out
}

// checkAttach rejects a pod whose volumes would take the node past a limit.
// Attachments only grow as pods land, so the rejection is monotonic.
func (s *solver) checkAttach(pg *podGroup, n *node) *rejection {
	if len(pg.attachments) == 0 {
		return nil
	}
	adds := n.newAttachments(pg.attachments)
	drivers := make([]string, 0, len(adds))
	for d := range adds {
		drivers = append(drivers, d)
	}
	sort.Strings(drivers)
	for _, d := range drivers {
		l := n.attachLimit(d)
		if l < 0 {
			continue
		}
		have := 0
		if n.attach != nil {
			have = n.attach.count[d]
		}
		if have+adds[d] > l {
			return &rejection{err: fmt.Errorf("would exceed the node's limit of %d %s volumes (%d attached, the pod adds %d)", l, d, have, adds[d]), monotonic: true}
		}
	}
	return nil
}

// attachTo records volumes a pod on the node attaches.
func (s *solver) attachTo(n *node, atts []volumes.Attachment) {
	if len(atts) == 0 {
		return
	}
	if n.attach == nil {
		n.attach = &nodeAttachments{users: map[string]int{}, count: map[string]int{}}
	}
	for _, a := range atts {
		k := attachKey(a)
		if n.attach.users[k] == 0 {
			s.bump(n.attach.count, a.Driver, 1)
		}
		s.bump(n.attach.users, k, 1)
	}
}

// attachFits reports whether instance type t can attach the new node's volumes.
func (n *node) attachFits(t *itype) bool {
	if n.attach == nil {
		return true
	}
	for d, c := range n.attach.count {
		if l, ok := t.it.AttachLimits[d]; ok && c > l {
			return false
		}
	}
	return true
}

// joinAttachments is the attachments of a node holding both nodes' pods.
func joinAttachments(a, b *node) *nodeAttachments {
	if a.attach == nil && b.attach == nil {
		return nil
	}
	j := &nodeAttachments{users: map[string]int{}, count: map[string]int{}}
	for _, n := range []*node{a, b} {
		if n.attach == nil {
			continue
		}
		for k, c := range n.attach.users {
			if c <= 0 {
				continue
			}
			if j.users[k] == 0 {
				j.count[driverOf(k)]++
			}
			j.users[k] += c
		}
	}
	return j
}

func attachKey(a volumes.Attachment) string { return a.Driver + "\x00" + a.Handle }

func driverOf(key string) string {
	d, _, _ := strings.Cut(key, "\x00")
	return d
}
