package instancetype

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// A class's placement group admits the types whose supported strategies
// include its own; connectionTracking admits Nitro types alone (Karpenter's
// compatibility checks).
func TestCompatible(t *testing.T) {
	all := &ec2types.PlacementGroupInfo{SupportedStrategies: []ec2types.PlacementGroupStrategy{"cluster", "partition", "spread"}}
	noCluster := &ec2types.PlacementGroupInfo{SupportedStrategies: []ec2types.PlacementGroupStrategy{"partition", "spread"}}
	nitro, xen := ec2types.InstanceTypeHypervisorNitro, ec2types.InstanceTypeHypervisorXen
	for _, tc := range []struct {
		name      string
		info      ec2types.InstanceTypeInfo
		strategy  string
		conntrack bool
		want      bool
	}{
		{"no group, no conntrack", ec2types.InstanceTypeInfo{Hypervisor: xen}, "", false, true},
		{"a cluster group, a type that takes it", ec2types.InstanceTypeInfo{PlacementGroupInfo: all, Hypervisor: nitro}, "cluster", false, true},
		{"a cluster group, a type that does not", ec2types.InstanceTypeInfo{PlacementGroupInfo: noCluster, Hypervisor: nitro}, "cluster", false, false},
		{"a spread group, the same type", ec2types.InstanceTypeInfo{PlacementGroupInfo: noCluster, Hypervisor: nitro}, "spread", false, true},
		{"a group, a type EC2 says nothing of", ec2types.InstanceTypeInfo{Hypervisor: nitro}, "spread", false, false},
		{"conntrack on Nitro", ec2types.InstanceTypeInfo{Hypervisor: nitro}, "", true, true},
		{"conntrack on Xen", ec2types.InstanceTypeInfo{Hypervisor: xen}, "", true, false},
	} {
		if got := compatible(tc.info, tc.strategy, tc.conntrack); got != tc.want {
			t.Errorf("%s: compatible = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Listed interfaces need a card for each, room for each device index, and
// as many EFAs as efa-only interfaces.
func TestHoldsInterfaces(t *testing.T) {
	card := func(index, max int32) ec2types.NetworkCardInfo {
		return ec2types.NetworkCardInfo{NetworkCardIndex: aws.Int32(index), MaximumNetworkInterfaces: aws.Int32(max)}
	}
	oneCard := ec2types.InstanceTypeInfo{NetworkInfo: &ec2types.NetworkInfo{NetworkCards: []ec2types.NetworkCardInfo{card(0, 3)}, EnaSupport: ec2types.EnaSupportRequired}}
	efa := ec2types.InstanceTypeInfo{NetworkInfo: &ec2types.NetworkInfo{NetworkCards: []ec2types.NetworkCardInfo{card(0, 4), card(1, 4)}, EnaSupport: ec2types.EnaSupportRequired,
		EfaInfo: &ec2types.EfaInfo{MaximumEfaInterfaces: aws.Int32(1)}}}
	noENA := ec2types.InstanceTypeInfo{NetworkInfo: &ec2types.NetworkInfo{NetworkCards: []ec2types.NetworkCardInfo{card(0, 3)}, EnaSupport: ec2types.EnaSupportUnsupported}}
	primary := awsv1.NetworkInterface{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}
	for _, tc := range []struct {
		name string
		info ec2types.InstanceTypeInfo
		nics []awsv1.NetworkInterface
		want bool
	}{
		{"none listed", noENA, nil, true},
		{"the primary interface", oneCard, []awsv1.NetworkInterface{primary}, true},
		{"no ENA", noENA, []awsv1.NetworkInterface{primary}, false},
		{"a second card the type lacks", oneCard, []awsv1.NetworkInterface{primary, {NetworkCardIndex: 1, InterfaceType: "efa-only"}}, false},
		{"a device index past the card's interfaces", oneCard, []awsv1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 3, InterfaceType: "interface"}}, false},
		{"an EFA on the second card", efa, []awsv1.NetworkInterface{primary, {NetworkCardIndex: 1, InterfaceType: "efa-only"}}, true},
		{"more EFAs than the type takes", efa, []awsv1.NetworkInterface{primary, {NetworkCardIndex: 1, InterfaceType: "efa-only"}, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"}}, false},
		{"an EFA on a type without any", oneCard, []awsv1.NetworkInterface{primary, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"}}, false},
	} {
		if got := holdsInterfaces(tc.info, tc.nics); got != tc.want {
			t.Errorf("%s: holdsInterfaces = %v, want %v", tc.name, got, tc.want)
		}
	}
}
