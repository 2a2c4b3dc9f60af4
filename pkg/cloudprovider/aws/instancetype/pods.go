// How many pods and extended resources (GPUs, Neuron, EFA) a node of a type
// offers.

package instancetype

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// eniLimitedPods is the VPC CNI's pod limit: each usable ENI of the default
// network card holds its IPv4 addresses less its own, plus two host-network
// pods (kube-proxy and the CNI). Only the default card counts: the CNI puts
// pods on it alone. An efa-only interface the class puts on card 0 takes
// an ENI and carries no IP address, so it is not usable (as Karpenter
// counts it).
func eniLimitedPods(info ec2types.InstanceTypeInfo, reservedENIs int, nics []awsv1.NetworkInterface) int64 {
	n := info.NetworkInfo
	if n == nil {
		return 0
	}
	enis := aws.ToInt32(n.MaximumNetworkInterfaces)
	def := aws.ToInt32(n.DefaultNetworkCardIndex)
	for _, card := range n.NetworkCards {
		if aws.ToInt32(card.NetworkCardIndex) == def {
			enis = aws.ToInt32(card.MaximumNetworkInterfaces)
			break
		}
	}
	usable := int64(enis) - int64(reservedENIs) - int64(efaOnly(nics, true))
	if usable <= 0 {
		return 0
	}
	return usable*(int64(aws.ToInt32(n.Ipv4AddressesPerInterface))-1) + 2
}

// efaOnly counts the class's efa-only interfaces, on card 0 alone when
// onDefaultCard.
func efaOnly(nics []awsv1.NetworkInterface, onDefaultCard bool) int {
	n := 0
	for _, nic := range nics {
		if nic.InterfaceType == "efa-only" && (!onDefaultCard || nic.NetworkCardIndex == 0) {
			n++
		}
	}
	return n
}

func podCount(info ec2types.InstanceTypeInfo, family amiFamily, kubelet *awsv1.KubeletConfiguration, reservedENIs int, nics []awsv1.NetworkInterface) int64 {
	var pods int64
	switch {
	case kubelet.MaxPods != nil:
		pods = int64(*kubelet.MaxPods)
	case family.eniLimitedPods:
		pods = eniLimitedPods(info, reservedENIs, nics)
	default:
		pods = DefaultMaxPods
	}
	// podsPerCore counts vCPUs, as the kubelet does.
	if ppc := int64(aws.ToInt32(kubelet.PodsPerCore)); ppc > 0 && family.podsPerCore {
		pods = min(pods, ppc*int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus)))
	}
	return pods
}

func extendedResources(info ec2types.InstanceTypeInfo, family amiFamily, nics []awsv1.NetworkInterface) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	// Branch interfaces for security groups per pod: EC2 does not report
	// them; the VPC resource controller's limits are in the catalog.
	if r, ok := catalog.Lookup(string(info.InstanceType)); ok {
		if q, ok := r.Allocatable[ResourcePodENI]; ok {
			out[ResourcePodENI] = q.Value()
		}
	}
	if info.GpuInfo != nil {
		for _, gpu := range info.GpuInfo.Gpus {
			switch aws.ToString(gpu.Manufacturer) {
			case "NVIDIA":
				out[ResourceNVIDIAGPU] += int64(aws.ToInt32(gpu.Count))
			case "AMD":
				out[ResourceAMDGPU] += int64(aws.ToInt32(gpu.Count))
			case "Habana":
				out[ResourceHabanaGaudi] += int64(aws.ToInt32(gpu.Count))
			}
		}
	}
	if ni := info.NeuronInfo; ni != nil && len(ni.NeuronDevices) > 0 {
		for _, d := range ni.NeuronDevices {
			out[ResourceAWSNeuron] += int64(aws.ToInt32(d.Count))
		}
		if d := ni.NeuronDevices[0]; d.CoreInfo != nil {
			out[ResourceAWSNeuronCore] = int64(aws.ToInt32(d.Count)) * int64(aws.ToInt32(d.CoreInfo.Count))
		}
	}
	// A class that lists its interfaces gets the EFAs it lists (its
	// efa-only ones), not the most the type could take: the device plugin
	// advertises the devices the node has.
	switch n := info.NetworkInfo; {
	case nics != nil:
		out[ResourceEFA] = int64(efaOnly(nics, false))
	case n != nil && n.EfaInfo != nil:
		out[ResourceEFA] = int64(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
	}
	// Windows pods take secondary IPv4 addresses of the primary ENI,
	// which the VPC resource controller advertises as a resource.
	if family.windows && info.NetworkInfo != nil {
		out[ResourcePrivateIPv4Address] = int64(aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface)) - 1
	}
	return out
}
