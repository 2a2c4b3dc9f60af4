package instancetype

import (
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
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
