// Package kwok is a fake cloud whose machines are Kubernetes Node objects that
// kwok plays the kubelet for. It exists so that all of Joiner — scheduling,
// launch, registration, disruption, termination — can run against a real
// control plane without a cloud account, priced from the embedded EC2 catalog
// so that decisions are the ones Joiner would make on AWS, and deterministic so
// that tests and benchmarks repeat.
package kwok

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// Name is what the provider calls itself in logs and metrics.
	Name = "kwok"
	// AnnotationKwokNode is the annotation the local control plane's kwok
	// selects its nodes by; without it a Node would never turn Ready.
	AnnotationKwokNode = "kwok.x-k8s.io/node"
	// LabelInstance marks the Nodes this provider launched, so that List
	// reports them as instances and never mistakes a Node someone else
	// registered (a control-plane node, another provider's) for a leak.
	LabelInstance = "joiner.sh/kwok-instance"
	// ImageID is the image every kwok machine "boots": there are no AMIs
	// for a class to choose from.
	ImageID = "kwok-ami"
	// ProviderIDPrefix starts every provider ID this cloud hands out.
	ProviderIDPrefix = "kwok://"
)

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// Options configure the fake cloud.
type Options struct {
	// Region is where every machine runs; default catalog.DefaultRegion.
	Region string
	// Zones are the zones offered; default the region's zones a, b and c.
	Zones []string
	// LaunchDelay is how long Create waits before the Node appears, so tests
	// can exercise the window in which a NodeClaim is launched but not yet
	// registered, as with a real machine booting.
	LaunchDelay time.Duration
	// NodeClasses reads EC2NodeClasses for drift checks, which run on every
	// NodeClaim reconcile: the controller passes its cached client so they
	// cost no API call. Default: the provider's own client.
	NodeClasses client.Reader
	// InsufficientCapacity lists offerings the cloud is out of, so tests can
	// drive Joiner's fallback and ICE handling deterministically.
	InsufficientCapacity []Unavailable
	// Clock times LaunchDelay; tests inject a fake one so that a boot delay
	// costs no wall time. Default clock.RealClock{}.
	Clock clock.Clock
	// Overlay, when set, reprices and resizes the types a NodePool launches
	// (NodeOverlays): Create picks the cheapest offering at the overlaid
	// price, and the Node reports the overlaid capacity.
	Overlay cloudprovider.TypeOverlay
}

// Unavailable matches offerings that have no capacity. An empty field matches
// any value, so {InstanceType: "m5.large"} takes a type out of every zone and
// {Zone: "us-east-1a"} takes a whole zone out.
type Unavailable struct {
	InstanceType, Zone, CapacityType string
}

func (u Unavailable) matches(instanceType string, o cloudprovider.Offering) bool {
	return (u.InstanceType == "" || u.InstanceType == instanceType) &&
		(u.Zone == "" || u.Zone == o.Zone) &&
		(u.CapacityType == "" || u.CapacityType == o.CapacityType)
}

// CloudProvider is the kwok cloud. It holds no state of its own beyond the
// catalog: every instance is a Node, so a restarted controller sees exactly
// the instances that exist, as it would with a real cloud's API.
type CloudProvider struct {
	kube   client.Client
	opts   Options
	types  []*cloudprovider.InstanceType
	byName map[string]*cloudprovider.InstanceType
	// shapes are the types as each EC2NodeClass shapes them (shape.go).
	shapes shapes
}

// New builds the provider and loads the catalog once, so a broken catalog
// fails at start-up rather than in the middle of a launch.
//
// kubeClient must read its own writes (an uncached client, or the manager's
// API reader): Create's idempotency and Delete's completion check both depend
// on seeing a Node the moment it is created or removed.
func New(kubeClient client.Client, opts Options) (*CloudProvider, error) {
	if kubeClient == nil {
		return nil, errors.New("kwok cloud provider needs a Kubernetes client")
	}
	if opts.Region == "" {
		opts.Region = catalog.DefaultRegion
	}
	if len(opts.Zones) == 0 {
		opts.Zones = catalog.DefaultZones(opts.Region)
	}
	opts.Zones = slices.Clone(opts.Zones)
	opts.InsufficientCapacity = slices.Clone(opts.InsufficientCapacity)
	if opts.NodeClasses == nil {
		opts.NodeClasses = kubeClient
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	its, err := catalog.InstanceTypes(catalog.Options{Region: opts.Region, Zones: opts.Zones})
	if err != nil {
		return nil, fmt.Errorf("kwok cloud provider: %w", err)
	}
	byName := make(map[string]*cloudprovider.InstanceType, len(its))
	for _, it := range its {
		for i := range it.Offerings {
			for _, u := range opts.InsufficientCapacity {
				if u.matches(it.Name, it.Offerings[i]) {
					it.Offerings[i].Available = false
				}
			}
		}
		byName[it.Name] = it
	}
	return &CloudProvider{kube: kubeClient, opts: opts, types: its, byName: byName}, nil
}

// Name implements cloudprovider.CloudProvider.
func (c *CloudProvider) Name() string { return Name }

// InstanceTypes returns the catalog for the configured region and zones, with
// the injected shortages marked unavailable, as the NodePool's EC2NodeClass
// shapes them (shape.go). The instance types are shared between calls and
// must not be modified.
func (c *CloudProvider) InstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	var ref *v1.NodeClassReference
	if np != nil {
		ref = np.Spec.Template.Spec.NodeClassRef
	}
	its, _, err := c.typesFor(ctx, ref)
	return slices.Clone(its), err
}

// Create launches the cheapest available offering the NodeClaim allows. A
// retried Create for a NodeClaim whose Node already exists returns that Node,
// so a controller that restarts mid-launch does not leak a second machine.
func (c *CloudProvider) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error) {
	if node, err := c.launchedBefore(ctx, nodeClaim.Name); err != nil || node != nil {
		if err != nil {
			return nil, err
		}
		if err := c.ensureStatus(ctx, node, nodeClaim.Spec.NodeClassRef); err != nil {
			return nil, err
		}
		out := c.launched(nodeClaim, node)
		return out, c.stampNodeClass(ctx, out)
	}
	if err := c.nodeClassReady(ctx, nodeClaim); err != nil {
		return nil, err
	}
	its, shapedByClass, err := c.typesFor(ctx, nodeClaim.Spec.NodeClassRef)
	if err != nil {
		return nil, &cloudprovider.NodeClassNotReadyError{Err: err}
	}
	it, offering, err := c.choose(nodeClaim, its)
	if err != nil {
		return nil, err
	}
	if d := c.opts.LaunchDelay; d > 0 {
		select {
		case <-c.opts.Clock.After(d):
		case <-ctx.Done():
			return nil, fmt.Errorf("launching %s: %w", nodeClaim.Name, ctx.Err())
		}
	}
	node := c.newNode(nodeClaim, it, offering)
	if shapedByClass {
		node.Annotations[AnnotationClassShaped] = "true"
	}
	if err := c.kube.Create(ctx, node); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating node %s: %w", nodeClaim.Name, err)
		}
		// Another Create for the same NodeClaim won the race; its machine is
		// the one to return.
		existing, gerr := c.launchedBefore(ctx, nodeClaim.Name)
		if gerr != nil {
			return nil, gerr
		}
		if existing == nil {
			return nil, fmt.Errorf("creating node %s: %w", nodeClaim.Name, err)
		}
		node = existing
	}
	if err := c.ensureStatus(ctx, node, nodeClaim.Spec.NodeClassRef); err != nil {
		return nil, err
	}
	out := c.launched(nodeClaim, node)
	return out, c.stampNodeClass(ctx, out)
}

// launchedBefore returns the Node an earlier Create made for this NodeClaim,
// nil when there is none, and an error when the name is taken by something
// that is not a live kwok instance, because reusing it would either adopt a
// Node we do not own or hand back a machine that is being torn down.
func (c *CloudProvider) launchedBefore(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up node %s: %w", name, err)
	}
	if !ours(node) {
		return nil, fmt.Errorf("node %s already exists and is not a kwok instance", name)
	}
	if node.DeletionTimestamp != nil {
		return nil, fmt.Errorf("node %s from an earlier launch is still being deleted", name)
	}
	return node, nil
}

// choose picks the cheapest available offering among the instance types the
// NodeClaim allows and fits in. Ties break by type name, zone and capacity
// type so that the same request always launches the same machine.
func (c *CloudProvider) choose(nodeClaim *v1.NodeClaim, its []*cloudprovider.InstanceType) (*cloudprovider.InstanceType, cloudprovider.Offering, error) {
	reqs, err := requirements.FromNodeSelectorRequirements(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, cloudprovider.Offering{}, fmt.Errorf("nodeclaim %s: %w", nodeClaim.Name, err)
	}
	requests := nodeClaim.Spec.Resources.Requests
	var (
		best       *cloudprovider.InstanceType
		bestOffer  cloudprovider.Offering
		compatible int
	)
	for _, it := range c.overlaid(nodeClaim.Labels[v1.LabelNodePool], its) {
		if !it.Admits(reqs) || !resources.FromResourceList(requests).Fits(resources.FromResourceList(it.Allocatable)) {
			continue
		}
		compatible++
		for _, o := range it.Offerings {
			if !o.Available || !reqs.Allows(corev1.LabelTopologyZone, o.Zone) || !reqs.Allows(v1.LabelCapacityType, o.CapacityType) {
				continue
			}
			if best == nil || cheaper(it.Name, o, best.Name, bestOffer) {
				best, bestOffer = it, o
			}
		}
	}
	if best != nil {
		return best, bestOffer, nil
	}
	asked := fmt.Sprintf("%s and requests %s", reqs, resources.ListString(requests))
	if compatible == 0 {
		return nil, cloudprovider.Offering{}, &cloudprovider.InsufficientCapacityError{
			Err: fmt.Errorf("nodeclaim %s: no instance type in %s satisfies %s", nodeClaim.Name, c.opts.Region, asked),
		}
	}
	return nil, cloudprovider.Offering{}, &cloudprovider.InsufficientCapacityError{
		Err: fmt.Errorf("nodeclaim %s: every offering of the %d instance types satisfying %s is unavailable", nodeClaim.Name, compatible, asked),
	}
}

// overlaid is the pool's view of types under the NodeOverlays.
func (c *CloudProvider) overlaid(pool string, types []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	if c.opts.Overlay == nil {
		return types
	}
	return c.opts.Overlay(pool, types)
}

// typeOf is the instance type of a kwok Node, overlaid for its pool; none
// for a Node its class shaped, which its status describes.
func (c *CloudProvider) typeOf(node *corev1.Node) (*cloudprovider.InstanceType, bool) {
	if node.Annotations[AnnotationClassShaped] == "true" {
		return nil, false
	}
	it, ok := c.byName[node.Labels[corev1.LabelInstanceTypeStable]]
	if !ok {
		return nil, false
	}
	return c.overlaid(node.Labels[v1.LabelNodePool], []*cloudprovider.InstanceType{it})[0], true
}

func cheaper(name string, o cloudprovider.Offering, bestName string, best cloudprovider.Offering) bool {
	if o.Price != best.Price {
		return o.Price < best.Price
	}
	if name != bestName {
		return name < bestName
	}
	if o.Zone != best.Zone {
		return o.Zone < best.Zone
	}
	return o.CapacityType < best.CapacityType
}

// newNode is the Node a kubelet started by Joiner would register for this
// offering: the NodeClaim's labels and taints plus the machine's facts, and
// the unregistered taint that keeps pods off until Joiner has synced it.
func (c *CloudProvider) newNode(nodeClaim *v1.NodeClaim, it *cloudprovider.InstanceType, o cloudprovider.Offering) *corev1.Node {
	labels := make(map[string]string, len(nodeClaim.Labels)+len(it.Labels)+6)
	for k, v := range nodeClaim.Labels {
		labels[k] = v
	}
	// The machine's own facts win over whatever the NodeClaim carried: they
	// are what the Node really is.
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelInstanceTypeStable] = it.Name
	labels[corev1.LabelTopologyZone] = o.Zone
	labels[corev1.LabelTopologyRegion] = c.opts.Region
	labels[v1.LabelCapacityType] = o.CapacityType
	labels[corev1.LabelHostname] = nodeClaim.Name
	labels[LabelInstance] = "true"

	var taints []corev1.Taint
	seen := map[string]bool{}
	for _, group := range [][]corev1.Taint{nodeClaim.Spec.Taints, nodeClaim.Spec.StartupTaints, {v1.UnregisteredNoExecuteTaint}} {
		for _, t := range group {
			// The apiserver rejects two taints with the same key and effect.
			if k := t.Key + ":" + string(t.Effect); !seen[k] {
				seen[k] = true
				taints = append(taints, t)
			}
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeClaim.Name,
			Labels:      labels,
			Annotations: map[string]string{AnnotationKwokNode: "fake"},
		},
		Spec: corev1.NodeSpec{
			ProviderID: ProviderID(c.opts.Region, o.Zone, nodeClaim.Name),
			Taints:     taints,
		},
		Status: c.nodeStatus(it, labels),
	}
}

// launched is the NodeClaim Create returns: the caller's object, so that its
// metadata and spec survive, with what the launch decided filled in.
func (c *CloudProvider) launched(nodeClaim *v1.NodeClaim, node *corev1.Node) *v1.NodeClaim {
	out := nodeClaim.DeepCopy()
	view := c.nodeClaimFor(node)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range view.Labels {
		out.Labels[k] = v
	}
	out.Status.ProviderID = view.Status.ProviderID
	out.Status.ImageID = view.Status.ImageID
	out.Status.Capacity = view.Status.Capacity
	out.Status.Allocatable = view.Status.Allocatable
	return out
}

// nodeClaimFor describes an instance as the cloud sees it. Capacity comes
// from the catalog rather than the Node's status, as a real cloud's API
// describes a machine by its type and not by what its kubelet reports.
func (c *CloudProvider) nodeClaimFor(node *corev1.Node) *v1.NodeClaim {
	labels := make(map[string]string, len(node.Labels))
	for k, v := range node.Labels {
		// The hostname is the kubelet's to set and our marker is an
		// implementation detail; neither belongs on a NodeClaim.
		if k == corev1.LabelHostname || k == LabelInstance {
			continue
		}
		labels[k] = v
	}
	capacity, allocatable := node.Status.Capacity.DeepCopy(), node.Status.Allocatable.DeepCopy()
	if it, ok := c.typeOf(node); ok {
		capacity, allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
	}
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:   node.Name,
			Labels: labels,
			// Garbage collection spares young instances; their age is the Node's.
			CreationTimestamp: node.CreationTimestamp,
		},
		Status: v1.NodeClaimStatus{
			ProviderID:  node.Spec.ProviderID,
			ImageID:     ImageID,
			Capacity:    capacity,
			Allocatable: allocatable,
		},
	}
}

// Get returns the instance with the given provider ID.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	_, _, name, err := ParseProviderID(providerID)
	if err != nil {
		return nil, err
	}
	node, err := c.instance(ctx, name)
	if err != nil {
		return nil, err
	}
	// A Node of the same name with another provider ID is a different
	// machine: the one asked about is gone.
	if node == nil || node.Spec.ProviderID != providerID {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	return c.nodeClaimFor(node), nil
}

// listPage is how many Nodes List asks for at a time: about 0.6 MB of
// answer, a page that garbage collection's pass every 30 s can hold
// without a spike in the controller's memory.
var listPage int64 = 100

// List returns every live instance, found by the label Create puts on its
// Nodes.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	var out []*v1.NodeClaim
	// A page at a time, as client-go's informers list: every Node of a
	// 1,400-node cluster in one answer was a body of 7.9 MB, read into a
	// buffer of twice that and then decoded, at once: in the scale run the
	// controller's largest spike of memory, every 30 s.
	for cont := ""; ; {
		nodes := &corev1.NodeList{}
		if err := c.kube.List(ctx, nodes, client.MatchingLabels{LabelInstance: "true"}, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("listing kwok nodes: %w", err)
		}
		for i := range nodes.Items {
			if n := &nodes.Items[i]; ours(n) && n.DeletionTimestamp == nil {
				out = append(out, c.nodeClaimFor(n))
			}
		}
		if cont = nodes.Continue; cont == "" {
			break
		}
	}
	slices.SortFunc(out, func(a, b *v1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete terminates the instance: it deletes the Node and returns nil, and
// returns a NodeClaimNotFoundError once the Node is gone or going, or when
// the provider ID is not a kwok one. Without a
// provider ID (a NodeClaim whose launch never returned) the Node is found by
// the NodeClaim's name, which Create uses for it.
//
// Finalizers on the Node are left alone: they belong to whoever put them
// there, typically Joiner's own termination controller, which removes its
// finalizer only after this call reports the instance gone. That is why a Node
// already marked for deletion counts as gone — in kwok the Node is the
// machine, and waiting for the object to disappear would deadlock against
// that finalizer.
func (c *CloudProvider) Delete(ctx context.Context, nodeClaim *v1.NodeClaim) error {
	providerID := nodeClaim.Status.ProviderID
	name := nodeClaim.Name
	if providerID != "" {
		_, _, n, err := ParseProviderID(providerID)
		if err != nil {
			// Another cloud's ID (one written into the NodeClaim's
			// status by hand, as Karpenter's garbage collection spec
			// does) names no machine of this one: there is nothing to
			// terminate, and the finalizer may go.
			return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
		}
		name = n
	}
	node, err := c.instance(ctx, name)
	if err != nil {
		return err
	}
	if node == nil || (providerID != "" && node.Spec.ProviderID != providerID) {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	// The UID precondition keeps a stale call from deleting a newer Node that
	// took the same name.
	if err := c.kube.Delete(ctx, node, client.Preconditions{UID: &node.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return &cloudprovider.NodeClaimNotFoundError{ProviderID: node.Spec.ProviderID}
		}
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}

// instance returns the live kwok instance called name, or nil: a missing
// Node, somebody else's Node and a Node being deleted are all "no instance".
func (c *CloudProvider) instance(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up node %s: %w", name, err)
	}
	if !ours(node) || node.DeletionTimestamp != nil {
		return nil, nil
	}
	return node, nil
}

// ours reports whether this provider launched the Node: it has our label and
// a provider ID we would have given it.
func ours(node *corev1.Node) bool {
	if node.Labels[LabelInstance] != "true" {
		return false
	}
	_, _, name, err := ParseProviderID(node.Spec.ProviderID)
	return err == nil && name == node.Name
}

// ProviderID is the provider ID of the instance called name. Region and zone
// are in it, as in AWS's, so that it alone says where a machine runs.
func ProviderID(region, zone, name string) string {
	return ProviderIDPrefix + region + "/" + zone + "/" + name
}

// ParseProviderID splits a provider ID made by ProviderID. It fails on any
// other shape, so IDs from another cloud are never taken for ours.
func ParseProviderID(providerID string) (region, zone, name string, err error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("%q is not a kwok provider ID (want %s<region>/<zone>/<name>)", providerID, ProviderIDPrefix)
	}
	return parts[0], parts[1], parts[2], nil
}
