// Package viewer is `joiner viewer`: a live terminal view of the cluster's
// nodes, what they cost and how full their pods' requests make them, in the
// style of eks-node-viewer, plus what only Joiner knows: why a node is or is
// not being disrupted, why a pod is pending, and how far the nodes' cost is
// from the LP lower bound of their pods.
//
// It is split so that nearly everything is pure: Build turns the objects
// read from the cluster into a Snapshot, Render turns a Snapshot into text.
// Only Run (the Bubble Tea program and the informers behind it) touches a
// terminal or the API server.
package viewer

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
)

// HoursPerMonth turns $/h into $/month, as eks-node-viewer does (365×24/12).
const HoursPerMonth = 730

// EventComponent is the source of the events Joiner records (its recorder's
// name, as Karpenter's): FailedScheduling and Nominated on pods,
// DisruptionBlocked on Nodes and NodeClaims.
const EventComponent = "karpenter"

// Event reasons the viewer shows.
const (
	ReasonDisruptionBlocked = "DisruptionBlocked"
	ReasonFailedScheduling  = "FailedScheduling"
	ReasonNominated         = "Nominated"
)

// Input is the cluster as read at one moment.
type Input struct {
	Nodes      []corev1.Node
	NodeClaims []v1.NodeClaim
	Pods       []corev1.Pod
	NodePools  []v1.NodePool
	DaemonSets []appsv1.DaemonSet
	Events     []corev1.Event
	// NodeOverlays, when the cluster serves them; those the controller
	// applied reprice the nodes and the bound.
	NodeOverlays []v1alpha1.NodeOverlay
	Now          time.Time
}

// States of a node line.
const (
	StateReady     = "Ready"
	StateNotReady  = "NotReady"
	StateCordoned  = "Cordoned"
	StateDeleting  = "Deleting"
	StateLaunching = "Launching"
)

// Node is one line: a Node, or a NodeClaim that has no Node yet.
type Node struct {
	Name                                       string
	NodeClaim                                  string
	InstanceType, CapacityType, Zone, NodePool string
	Cloud, Region                              string
	Price                                      float64
	Priced                                     bool
	// Effective is Price on the bill under the account's commitments.
	Effective             float64
	Labels                map[string]string
	Created               time.Time
	Age                   string
	Requests, Allocatable corev1.ResourceList
	Pods                  int
	States                []string
	Extra                 []string // values of Options.ExtraLabels
	Disruption            []string // Joiner's disruption status, see disruptionStatus
	HasNode               bool
}

// PendingPod is a pod waiting for a node, with the last word Joiner had on it.
type PendingPod struct {
	Name   string // namespace/name
	Age    string
	Reason string
}

// Total is one resource over the shown nodes.
type Total struct {
	Resource              corev1.ResourceName
	Requests, Allocatable resource.Quantity
}

// Snapshot is everything the screen shows, computed; Render only lays it out.
type Snapshot struct {
	Options   Options
	Nodes     []Node
	Launching int // lines that are NodeClaims without a node
	Totals    []Total
	Pending   []PendingPod
	// PricePerHour sums the priced lines; Unpriced counts the others.
	PricePerHour float64
	Unpriced     int
	// PriceNotes say where prices come from, one per cloud in view.
	PriceNotes []string
	// EffectivePerHour is PricePerHour on the bill under the account's
	// commitments; Committed says there are commitments, and
	// CommitmentNotes how much of each is in use and idle.
	EffectivePerHour float64
	Committed        bool
	CommitmentNotes  []string
	// Bound is the LP lower bound ($/h) of the shown nodes' pods on new
	// nodes from the NodePools, BoundPods how many pods it places, and
	// BoundErr why there is none.
	Bound     float64
	BoundPods int
	BoundErr  string
}

// Bounder computes the LP lower bound of a scheduling snapshot;
// scheduling.LowerBound, or a cache in front of it.
type Bounder func(scheduling.Snapshot) (float64, error)

// Build computes the snapshot. prices may be nil only with DisablePricing;
// bound nil means scheduling.LowerBound.
func Build(in Input, opts Options, prices *Prices, bound Bounder) Snapshot {
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	if len(opts.Resources) == 0 {
		opts.Resources = []corev1.ResourceName{corev1.ResourceCPU}
	}
	s := Snapshot{Options: opts}

	podsByNode := map[string][]*corev1.Pod{}
	for i := range in.Pods {
		p := &in.Pods[i]
		if pods.IsTerminal(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
		} else if p.DeletionTimestamp == nil && !pods.IsOwnedByNode(p) {
			s.Pending = append(s.Pending, pendingPod(p, in))
		}
	}
	sort.Slice(s.Pending, func(i, j int) bool { return s.Pending[i].Name < s.Pending[j].Name })

	blocked := latestBlocked(in.Events)
	claimByProvider, claimByNode := map[string]*v1.NodeClaim{}, map[string]*v1.NodeClaim{}
	for i := range in.NodeClaims {
		nc := &in.NodeClaims[i]
		if nc.Status.ProviderID != "" {
			claimByProvider[nc.Status.ProviderID] = nc
		}
		if nc.Status.NodeName != "" {
			claimByNode[nc.Status.NodeName] = nc
		}
	}
	claimed := map[string]bool{}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if !opts.Selector.Matches(labels.Set(n.Labels)) {
			continue
		}
		nc := claimByProvider[n.Spec.ProviderID]
		if nc == nil {
			nc = claimByNode[n.Name]
		}
		line := Node{Name: n.Name, HasNode: true, Labels: n.Labels, Created: n.CreationTimestamp.Time,
			InstanceType: n.Labels[corev1.LabelInstanceTypeStable], CapacityType: n.Labels[v1.LabelCapacityType],
			Zone: n.Labels[corev1.LabelTopologyZone], Region: n.Labels[corev1.LabelTopologyRegion], NodePool: n.Labels[v1.LabelNodePool],
			Cloud: CloudOf(n.Spec.ProviderID), Allocatable: n.Status.Allocatable}
		if !state.NodeReady(n) {
			line.States = append(line.States, StateNotReady)
		}
		if n.Spec.Unschedulable {
			line.States = append(line.States, StateCordoned)
		}
		if n.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil) {
			line.States = append(line.States, StateDeleting)
		}
		if nc != nil {
			claimed[nc.Name] = true
			line.NodeClaim = nc.Name
			if meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized) == nil ||
				!meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				line.States = append(line.States, StateLaunching)
			}
			line.Disruption = disruptionStatus(nc, in.Now, blocked, n.Name)
		} else if b, ok := blocked[blockedKey{"Node", n.Name}]; ok {
			line.Disruption = []string{"blocked: " + b.Message}
		}
		line.Requests = corev1.ResourceList{}
		for _, p := range podsByNode[n.Name] {
			for name, q := range pods.Requests(p) {
				sum := line.Requests[name]
				sum.Add(q)
				line.Requests[name] = sum
			}
			line.Pods++
		}
		s.Nodes = append(s.Nodes, line)
	}
	for i := range in.NodeClaims {
		nc := &in.NodeClaims[i]
		if claimed[nc.Name] || !opts.Selector.Matches(labels.Set(nc.Labels)) {
			continue
		}
		line := Node{Name: nc.Name, NodeClaim: nc.Name, Labels: nc.Labels, Created: nc.CreationTimestamp.Time,
			InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], CapacityType: nc.Labels[v1.LabelCapacityType],
			Zone: nc.Labels[corev1.LabelTopologyZone], Region: nc.Labels[corev1.LabelTopologyRegion], NodePool: nc.Labels[v1.LabelNodePool],
			Cloud: CloudOf(nc.Status.ProviderID), Allocatable: nc.Status.Allocatable, Requests: corev1.ResourceList{},
			States: []string{StateLaunching}}
		if nc.DeletionTimestamp != nil {
			line.States = append(line.States, StateDeleting)
		}
		line.Disruption = disruptionStatus(nc, in.Now, blocked, "")
		s.Launching++
		s.Nodes = append(s.Nodes, line)
	}

	// A NodeClaim not yet launched has no provider ID: it is priced by the
	// cloud the other lines come from.
	defaultCloud := majorityCloud(s.Nodes)
	ovl := appliedOverlays(in)
	clouds := map[string]string{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Cloud == "" {
			n.Cloud = defaultCloud
		}
		if n.Region == "" {
			n.Region = regionOfZone(n.Zone)
		}
		n.Age = duration.HumanDuration(in.Now.Sub(n.Created))
		for _, k := range opts.ExtraLabels {
			v, ok := n.Labels[k]
			if !ok && k == ComputedLabelNodeAge {
				v = n.Age
			}
			n.Extra = append(n.Extra, v)
		}
		if opts.DisablePricing || prices == nil {
			continue
		}
		n.Price, n.Priced = prices.Price(Machine{Cloud: n.Cloud, Region: n.Region, Zone: n.Zone, InstanceType: n.InstanceType, CapacityType: n.CapacityType})
		if n.Priced {
			n.Price = ovl.price(n, n.Price)
			s.PricePerHour += n.Price
		} else {
			s.Unpriced++
		}
		if _, ok := clouds[n.Cloud]; !ok {
			clouds[n.Cloud] = n.Region
		}
	}
	if !opts.DisablePricing && prices != nil {
		s.applyCommitments(prices.Commitments)
	}
	sortNodes(s.Nodes, opts.Sort)
	for _, cloud := range slices.Sorted(maps.Keys(clouds)) {
		s.PriceNotes = append(s.PriceNotes, prices.Note(cloud, clouds[cloud]))
	}
	if note := ovl.note(); note != "" && len(clouds) > 0 {
		s.PriceNotes = append(s.PriceNotes, note)
	}

	for _, r := range opts.Resources {
		t := Total{Resource: r}
		for _, n := range s.Nodes {
			if q, ok := n.Requests[r]; ok {
				t.Requests.Add(q)
			}
			if q, ok := n.Allocatable[r]; ok {
				t.Allocatable.Add(q)
			}
		}
		s.Totals = append(s.Totals, t)
	}

	if !opts.DisablePricing && prices != nil {
		s.computeBound(in, podsByNode, prices, bound, defaultCloud, ovl)
	}
	return s
}

// computeBound prices the pods of the shown nodes Joiner manages (less DaemonSet and mirror pods,
// which the bound adds per node from the DaemonSets) at the LP lower bound
// over the NodePools, with the catalog's instance types priced as the nodes
// are.
func (s *Snapshot) computeBound(in Input, podsByNode map[string][]*corev1.Pod, prices *Prices, bound Bounder, cloud string, ovl overlays) {
	if bound == nil {
		bound = scheduling.LowerBound
	}
	var snap scheduling.Snapshot
	region := ""
	zones := map[string]bool{}
	for _, n := range s.Nodes {
		if region == "" && n.Cloud == cloud {
			region = n.Region
		}
		if n.Zone != "" {
			zones[n.Zone] = true
		}
		if !n.Managed() {
			continue
		}
		for _, p := range podsByNode[n.Name] {
			if !pods.IsOwnedByNode(p) {
				snap.Pods = append(snap.Pods, p)
			}
		}
	}
	if len(snap.Pods) == 0 || len(in.NodePools) == 0 {
		return
	}
	its, err := prices.InstanceTypes(cloud, region, slices.Sorted(maps.Keys(zones)))
	if err != nil {
		s.BoundErr = err.Error()
		return
	}
	for i := range in.NodePools {
		np := &in.NodePools[i]
		if np.DeletionTimestamp == nil {
			snap.NodePools = append(snap.NodePools, scheduling.NodePool{NodePool: np, InstanceTypes: ovl.types(np, its)})
		}
	}
	for i := range in.DaemonSets {
		snap.DaemonSets = append(snap.DaemonSets, pods.DaemonSetPod(&in.DaemonSets[i]))
	}
	b, err := bound(snap)
	if err != nil {
		s.BoundErr = err.Error()
		return
	}
	s.Bound, s.BoundPods = b, len(snap.Pods)
}

// disruptionStatus is what Joiner says about a NodeClaim's disruption: the
// conditions its disruption controller sets (Consolidatable, Drifted, and
// DisruptionReason while a command runs), when expireAfter will replace it,
// and the latest DisruptionBlocked event on it or its node.
func disruptionStatus(nc *v1.NodeClaim, now time.Time, blocked map[blockedKey]corev1.Event, node string) []string {
	var out []string
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
		out = append(out, "disrupting: "+strings.ToLower(c.Reason))
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); c != nil && c.Status == metav1.ConditionTrue {
		out = append(out, "drifted ("+c.Reason+")")
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
		out = append(out, "consolidatable")
	}
	if d := nc.Spec.ExpireAfter.Duration; d != nil {
		left := nc.CreationTimestamp.Add(*d).Sub(now)
		if left <= 0 {
			out = append(out, "expired")
		} else {
			out = append(out, "expires in "+duration.HumanDuration(left))
		}
	}
	var latest *corev1.Event
	for _, k := range []blockedKey{{"NodeClaim", nc.Name}, {"Node", node}} {
		if e, ok := blocked[k]; ok && (latest == nil || eventTime(e).After(eventTime(*latest))) {
			latest = &e
		}
	}
	if latest != nil {
		out = append(out, "blocked: "+latest.Message)
	}
	return out
}

type blockedKey struct{ kind, name string }

// latestBlocked is the latest DisruptionBlocked event Joiner recorded per
// object.
func latestBlocked(events []corev1.Event) map[blockedKey]corev1.Event {
	out := map[blockedKey]corev1.Event{}
	for _, e := range events {
		if e.Reason != ReasonDisruptionBlocked || !fromJoiner(e) {
			continue
		}
		k := blockedKey{e.InvolvedObject.Kind, e.InvolvedObject.Name}
		if cur, ok := out[k]; !ok || eventTime(e).After(eventTime(cur)) {
			out[k] = e
		}
	}
	return out
}

// pendingPod gives the latest of Joiner's FailedScheduling or Nominated
// events on the pod; kube-scheduler's own FailedScheduling says only that no
// node fits, which is why the pod is Joiner's business in the first place.
func pendingPod(p *corev1.Pod, in Input) PendingPod {
	out := PendingPod{Name: p.Namespace + "/" + p.Name, Age: duration.HumanDuration(in.Now.Sub(p.CreationTimestamp.Time))}
	var latest *corev1.Event
	for i := range in.Events {
		e := &in.Events[i]
		if !fromJoiner(*e) || (e.Reason != ReasonFailedScheduling && e.Reason != ReasonNominated) {
			continue
		}
		if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Namespace != p.Namespace || e.InvolvedObject.Name != p.Name {
			continue
		}
		if e.InvolvedObject.UID != "" && p.UID != "" && e.InvolvedObject.UID != p.UID {
			continue
		}
		if latest == nil || eventTime(*e).After(eventTime(*latest)) {
			latest = e
		}
	}
	if latest != nil {
		out.Reason = latest.Message
	}
	return out
}

func fromJoiner(e corev1.Event) bool {
	return e.Source.Component == EventComponent || e.ReportingController == EventComponent
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func majorityCloud(nodes []Node) string {
	count := map[string]int{}
	for _, n := range nodes {
		if n.Cloud != "" {
			count[n.Cloud]++
		}
	}
	best := CloudKwok
	for _, c := range slices.Sorted(maps.Keys(count)) {
		if count[c] > count[best] {
			best = c
		}
	}
	return best
}

// regionOfZone is the region of an AWS zone name (us-east-1a → us-east-1),
// for nodes without a region label.
func regionOfZone(zone string) string {
	if len(zone) < 2 {
		return ""
	}
	return strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
}

// Managed reports a node Joiner manages (it has a NodeClaim): the nodes
// whose pods the LP bound prices, since only they could be replaced.
func (n Node) Managed() bool { return n.HasNode && n.NodeClaim != "" }

// String is for debugging.
func (n Node) String() string { return fmt.Sprintf("%s(%s)", n.Name, strings.Join(n.States, ",")) }
