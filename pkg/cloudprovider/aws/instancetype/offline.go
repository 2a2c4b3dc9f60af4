package instancetype

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// OfClass is the embedded catalog's types (its, as catalog.InstanceTypes
// gives them) as nodes launched from class nc would report them: what
// `joiner plan` and `joiner simulate` plan with, where no EC2 describes
// the types. The catalog's resources are those of the defaults (AL2023,
// no kubelet settings, the default root volume: TestAllocatableMatchesCatalog),
// so each type is shifted by what Compute makes of the class against the
// defaults, over a record of the type rebuilt from the catalog: its vCPUs,
// memory, architecture, local NVMe, and one interface with the addresses
// for its pods. The class's kubelet (maxPods, podsPerCore, kubeReserved,
// systemReserved, evictionHard), block devices, instance store policy and
// AMI family then count as they do in the controller. The types are
// returned as they are when the class changes nothing Compute reads; the
// error names the class and the field.
func OfClass(its []*cloudprovider.InstanceType, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	def := Inputs{AMIFamily: awsv1.AMIFamilyAL2023, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent}
	in := InputsFor(nc, DefaultVMMemoryOverheadPercent, 0)
	if in.Kubelet == nil && in.AMIFamily == def.AMIFamily && len(in.BlockDeviceMappings) == 0 && in.InstanceStorePolicy == nil && in.NetworkInterfaces == nil {
		return its, nil
	}
	out := make([]*cloudprovider.InstanceType, len(its))
	for i, it := range its {
		info := catalogRecord(it)
		labelsD, capD, allocD, err := Compute(info, def)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %w", it.Name, err)
		}
		labelsC, capC, allocC, err := Compute(info, in)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		cp := it.Copy()
		cp.Capacity = shift(it.Capacity, capD, capC)
		cp.Allocatable = shift(it.Allocatable, allocD, allocC)
		cp.Labels = make(map[string]string, len(it.Labels))
		for k, v := range it.Labels {
			cp.Labels[k] = v
		}
		for k, v := range labelsC {
			if labelsD[k] != v {
				cp.Labels[k] = v
			}
		}
		for k := range labelsD {
			if _, ok := labelsC[k]; !ok {
				delete(cp.Labels, k)
			}
		}
		out[i] = cp
	}
	return out, nil
}

// catalogRecord is what EC2 would say of a catalog type, as far as
// Compute's resources depend on it. The pods the catalog gives (the VPC
// CNI's limit under the defaults) are one interface's addresses: the
// split between interfaces is not in the catalog, and only its product
// counts unless RESERVED_ENIS or efa-only interfaces take some away.
func catalogRecord(it *cloudprovider.InstanceType) ec2types.InstanceTypeInfo {
	cpu := it.Capacity[corev1.ResourceCPU]
	mem := it.Capacity[corev1.ResourceMemory]
	pods := it.Allocatable[corev1.ResourcePods]
	arch := ec2types.ArchitectureTypeX8664
	if it.Labels[corev1.LabelArchStable] == "arm64" {
		arch = ec2types.ArchitectureTypeArm64
	}
	info := ec2types.InstanceTypeInfo{
		InstanceType:  ec2types.InstanceType(it.Name),
		VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(int32(cpu.Value()))},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mem.Value() / (1 << 20))},
		ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(1),
			Ipv4AddressesPerInterface: aws.Int32(int32(max(pods.Value()-1, 1)))},
	}
	if gb, err := strconv.ParseInt(it.Labels[LabelInstanceLocalNVME], 10, 64); err == nil && gb > 0 {
		info.InstanceStorageInfo = &ec2types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(gb)}
	}
	return info
}

// shift is base moved by what Compute gives under the class (to) against
// the defaults (from), never below zero.
func shift(base, from, to corev1.ResourceList) corev1.ResourceList {
	out := base.DeepCopy()
	names := map[corev1.ResourceName]bool{}
	for n := range from {
		names[n] = true
	}
	for n := range to {
		names[n] = true
	}
	for n := range names {
		f, t := from[n], to[n]
		if f.Cmp(t) == 0 {
			continue
		}
		q := out[n]
		q.Add(t)
		q.Sub(f)
		if q.Sign() <= 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[n] = q
	}
	return out
}

// CheckClass is the error OfClass would give for the class: a setting
// Compute cannot read (a kubeReserved that is not a quantity, say), named
// by its field. A trace that applies the class mid-run is checked with it
// before the run starts.
func CheckClass(nc *awsv1.EC2NodeClass) error {
	info := ec2types.InstanceTypeInfo{InstanceType: "m5.large", VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2)},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)},
		ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}},
		NetworkInfo:   &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10)}}
	if _, _, _, err := Compute(info, InputsFor(nc, DefaultVMMemoryOverheadPercent, 0)); err != nil {
		return fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	return nil
}
