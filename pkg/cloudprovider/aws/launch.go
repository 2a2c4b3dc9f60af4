package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/launchtemplate"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/placementgroup"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// Cluster is what a node needs to join: the endpoint and CA it trusts, the
// service CIDR (nodeadm) and the cluster DNS address.
type Cluster struct {
	Name        string
	Endpoint    string
	CABundle    string
	ServiceCIDR string
	DNS         []string
}

// IPv6 reports an IPv6 cluster, by its service CIDR or, without one, its
// DNS address.
func (c Cluster) IPv6() bool {
	if c.ServiceCIDR != "" {
		ip, _, err := net.ParseCIDR(c.ServiceCIDR)
		return err == nil && ip.To4() == nil
	}
	if len(c.DNS) > 0 {
		ip := net.ParseIP(c.DNS[0])
		return ip != nil && ip.To4() == nil
	}
	return false
}

// TemplateEnsurer makes one launch template per launch configuration.
type TemplateEnsurer interface {
	Ensure(ctx context.Context, in launchtemplate.Input) (launchtemplate.LaunchTemplate, error)
	// Invalidate forgets a template EC2 no longer has.
	Invalidate(name string)
}

// Launcher resolves the launch templates of a launch: for each instance
// type, the class's AMI that fits it and user data stating the type's max
// pods and kube-reserved.
type Launcher struct {
	Templates TemplateEnsurer
	Cluster   Cluster
	// PlacementGroups resolves the class's placementGroupSelector; nil
	// launches into none.
	PlacementGroups PlacementGroupGetter
	// ReservationsTargeted is the ReservedCapacity gate: launches go into
	// reservations only when targeted (launchtemplate.Input).
	ReservationsTargeted bool
}

// PlacementGroupGetter resolves a class's placement group (nil for none).
type PlacementGroupGetter interface {
	Get(ctx context.Context, nc *awsv1.EC2NodeClass) (*placementgroup.Group, error)
}

// ForLaunch groups the types by (AMI, max pods, kube-reserved) and ensures
// a template per group. Types no AMI of the class fits are left out.
func (l *Launcher) ForLaunch(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, its []*cloudprovider.InstanceType, capacityType string) (map[string]string, error) {
	return l.forLaunch(ctx, nc, nodeClaim, its, capacityType, nil)
}

// ForReservation is the template that launches the type into the
// reservation: EC2 takes the reservation's room only when the template
// targets it by id, and a Capacity Block only with its own market type.
func (l *Launcher) ForReservation(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, it *cloudprovider.InstanceType, r awsv1.CapacityReservation) (string, error) {
	out, err := l.forLaunch(ctx, nc, nodeClaim, []*cloudprovider.InstanceType{it}, v1.CapacityTypeReserved, &r)
	return out[it.Name], err
}

func (l *Launcher) forLaunch(ctx context.Context, nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, its []*cloudprovider.InstanceType, capacityType string, reservation *awsv1.CapacityReservation) (map[string]string, error) {
	family := amifamily.Family(nc)
	type group struct {
		ami          string
		maxPods      int32
		kubeReserved corev1.ResourceList
		efa          int32
		types        []string
	}
	// A NodeClaim whose pods request EFA gets every EFA interface its type
	// has: the device plugin advertises what is attached, and the planner
	// counted the type's whole EFA capacity.
	wantsEFA := false
	if q, ok := nodeClaim.Spec.Resources.Requests[instancetype.ResourceEFA]; ok && !q.IsZero() && len(nc.Spec.NetworkInterfaces) == 0 {
		wantsEFA = true
	}
	groups := map[string]*group{}
	var order []string
	for _, it := range its {
		ami := amiFor(nc, it)
		if ami == "" {
			continue
		}
		pods := it.Capacity.Pods().Value()
		var efa int32
		if wantsEFA {
			q := it.Capacity[instancetype.ResourceEFA]
			efa = int32(q.Value())
		}
		key := fmt.Sprintf("%s/%d/%s/%d", ami, pods, resourceKey(it.KubeReserved), efa)
		g := groups[key]
		if g == nil {
			g = &group{ami: ami, maxPods: int32(pods), kubeReserved: it.KubeReserved, efa: efa}
			groups[key] = g
			order = append(order, key)
		}
		g.types = append(g.types, it.Name)
	}
	sgs := make([]string, 0, len(nc.Status.SecurityGroups))
	for _, sg := range nc.Status.SecurityGroups {
		sgs = append(sgs, sg.ID)
	}
	tenancy, err := Tenancy(nodeClaim)
	if err != nil {
		return nil, err
	}
	var pgID string
	if l.PlacementGroups != nil {
		pg, err := l.PlacementGroups.Get(ctx, nc)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		if pg != nil {
			pgID = pg.ID
		}
	}
	out := map[string]string{}
	hash := nc.Hash()
	for _, key := range order {
		g := groups[key]
		userData, err := amifamily.UserData(family, l.input(nc, nodeClaim, g.maxPods, g.kubeReserved))
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		lt, err := l.Templates.Ensure(ctx, launchtemplate.Input{
			NodeClassName: nc.Name, NodeClassHash: hash, NodePool: nodeClaim.Labels[v1.LabelNodePool], CapacityType: capacityType,
			AMIFamily: family, ImageID: g.ami, UserData: userData, SecurityGroupIDs: sgs, InstanceProfile: nc.Status.InstanceProfile,
			BlockDeviceMappings: nc.Spec.BlockDeviceMappings, MetadataOptions: nc.Spec.MetadataOptions,
			DetailedMonitoring:       nc.Spec.DetailedMonitoring != nil && *nc.Spec.DetailedMonitoring,
			AssociatePublicIPAddress: nc.Spec.AssociatePublicIPAddress, IPPrefixCount: nc.Spec.IPPrefixCount, Tags: nc.Spec.Tags,
			PlacementGroupID: pgID, ConnectionTracking: nc.Spec.ConnectionTracking, NestedVirtualization: nestedVirtualization(nc),
			NetworkInterfaces: nc.Spec.NetworkInterfaces, EFAInterfaces: g.efa, Tenancy: tenancy,
			CapacityReservationID: reservationID(reservation), CapacityBlock: reservation != nil && reservation.ReservationType == "capacity-block",
			Interruptible: reservation != nil && reservation.Interruptible, ReservationsTargeted: l.ReservationsTargeted,
			IPv6: l.Cluster.IPv6(), PlacementPartition: requiredPartition(nodeClaim),
		})
		if err != nil {
			return nil, fmt.Errorf("launch template for EC2NodeClass %s: %w", nc.Name, err)
		}
		for _, t := range g.types {
			out[t] = lt.Name
		}
	}
	return out, nil
}

// Forget drops the named templates from the cache, so the next launch
// makes them again.
func (l *Launcher) Forget(names []string) {
	for _, n := range names {
		l.Templates.Invalidate(n)
	}
}

// input is the user data's content. The kubelet registers with the
// NodeClaim's taints and startup taints plus karpenter.sh/unregistered,
// which keeps pods off until Joiner has synced the node with its NodeClaim.
func (l *Launcher) input(nc *awsv1.EC2NodeClass, nodeClaim *v1.NodeClaim, maxPods int32, kubeReserved corev1.ResourceList) amifamily.Input {
	kubelet := &awsv1.KubeletConfiguration{}
	if nc.Spec.Kubelet != nil {
		kubelet = nc.Spec.Kubelet.DeepCopy()
	}
	if len(kubeReserved) > 0 {
		merged := map[string]string{}
		for name, q := range kubeReserved {
			merged[string(name)] = q.String()
		}
		for k, v := range kubelet.KubeReserved {
			merged[k] = v
		}
		kubelet.KubeReserved = merged
	}
	taints := append([]corev1.Taint{}, nodeClaim.Spec.Taints...)
	taints = append(taints, v1.UnregisteredNoExecuteTaint)
	return amifamily.Input{
		ClusterName: l.Cluster.Name, ClusterEndpoint: l.Cluster.Endpoint, CABundle: l.Cluster.CABundle,
		ClusterCIDR: l.Cluster.ServiceCIDR, ClusterDNS: l.Cluster.DNS,
		Labels: nodeClaim.Labels, Taints: taints, StartupTaints: nodeClaim.Spec.StartupTaints,
		Kubelet: kubelet, MaxPods: maxPods, CustomUserData: nc.Spec.UserData,
		InstanceStoreRAID0: nc.Spec.InstanceStorePolicy != nil && *nc.Spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0,
	}
}

// amiFor is the first AMI of the class's status (newest first) whose
// requirements the instance type meets.
func amiFor(nc *awsv1.EC2NodeClass, it *cloudprovider.InstanceType) string {
	// AL2023 does not boot on the first Graviton generation, whatever the
	// image's architecture says.
	if amifamily.Family(nc) == awsv1.AMIFamilyAL2023 && it.Labels[instancetype.LabelInstanceFamily] == "a1" {
		return ""
	}
	for _, ami := range nc.Status.AMIs {
		if amiFits(ami, it) {
			return ami.ID
		}
	}
	return ""
}

func resourceKey(rl corev1.ResourceList) string {
	parts := make([]string, 0, len(rl))
	for name, q := range rl {
		parts = append(parts, string(name)+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// ValidateUserData renders the class's user data as a launch would, with
// the class's own settings and no instance type: the user's spec.userData
// must merge with Joiner's, and what fails here would fail every launch.
// The size is reported from here on, before any launch, an oversized one
// too, as Karpenter's dry run reports it.
func (l *Launcher) ValidateUserData(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	userData, err := amifamily.UserData(amifamily.Family(nc), l.input(nc, &v1.NodeClaim{}, 0, nil))
	var tooLarge *amifamily.TooLargeError
	switch {
	case err == nil:
		launchtemplate.RecordUserData(ctx, nc.Name, userData)
	case errors.As(err, &tooLarge):
		launchtemplate.RecordUserDataSize(ctx, nc.Name, tooLarge.Size)
	}
	return err
}

func nestedVirtualization(nc *awsv1.EC2NodeClass) *string {
	if nc.Spec.CPUOptions == nil {
		return nil
	}
	return nc.Spec.CPUOptions.NestedVirtualization
}

// LabelInstanceTenancy and LabelZoneID are the well-known labels of an
// instance's tenancy and its zone's ID, Karpenter's.
const (
	LabelInstanceTenancy = awsv1.Group + "/instance-tenancy"
	LabelZoneID          = "topology.k8s.aws/zone-id"
)

// Tenancy is the tenancy a NodeClaim launches with: default (shared
// hardware) when its requirements allow it, else dedicated; a NodeClaim
// that allows neither cannot launch.
func Tenancy(nodeClaim *v1.NodeClaim) (string, error) {
	reqs, err := requirements.FromNodeSelectorRequirements(nodeClaim.Spec.Requirements...)
	if err != nil {
		return "", fmt.Errorf("nodeclaim %s: %w", nodeClaim.Name, err)
	}
	for _, t := range []string{"default", "dedicated"} {
		if reqs.Allows(LabelInstanceTenancy, t) {
			return t, nil
		}
	}
	return "", fmt.Errorf("nodeclaim %s: requirement %s allows neither default nor dedicated, the only tenancies EC2 launches", nodeClaim.Name, LabelInstanceTenancy)
}

func reservationID(r *awsv1.CapacityReservation) string {
	if r == nil {
		return ""
	}
	return r.ID
}

// requiredPartition is the one placement-group partition the NodeClaim's
// requirements allow, or 0: EC2 then picks the partition, and the node's
// label says which.
func requiredPartition(nodeClaim *v1.NodeClaim) int32 {
	for _, r := range nodeClaim.Spec.Requirements {
		if r.Key == placementgroup.LabelPartition && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if n, err := strconv.Atoi(r.Values[0]); err == nil && n > 0 {
				return int32(n)
			}
		}
	}
	return 0
}
