package instancetype

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// Well-known labels of an instance type, as Karpenter names them.
const (
	LabelInstanceCategory                     = awsv1.Group + "/instance-category"
	LabelInstanceFamily                       = awsv1.Group + "/instance-family"
	LabelInstanceGeneration                   = awsv1.Group + "/instance-generation"
	LabelInstanceSize                         = awsv1.Group + "/instance-size"
	LabelInstanceCPU                          = awsv1.Group + "/instance-cpu"
	LabelInstanceCPUManufacturer              = awsv1.Group + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = awsv1.Group + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = awsv1.Group + "/instance-memory"
	LabelInstanceHypervisor                   = awsv1.Group + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = awsv1.Group + "/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex               = awsv1.Group + "/instance-capability-flex"
	LabelInstanceEBSBandwidth                 = awsv1.Group + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = awsv1.Group + "/instance-network-bandwidth"
	LabelInstanceLocalNVME                    = awsv1.Group + "/instance-local-nvme"
	LabelInstanceGPUName                      = awsv1.Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = awsv1.Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = awsv1.Group + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = awsv1.Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = awsv1.Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = awsv1.Group + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = awsv1.Group + "/instance-accelerator-count"
)

// Extended resources a node of the type advertises, from its device plugins
// and the VPC resource controller.
const (
	ResourcePodENI             corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	ResourceEFA                corev1.ResourceName = "vpc.amazonaws.com/efa"
	ResourcePrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"
	ResourceNVIDIAGPU          corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU             corev1.ResourceName = "amd.com/gpu"
	ResourceHabanaGaudi        corev1.ResourceName = "habana.ai/gaudi"
	ResourceAWSNeuron          corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore      corev1.ResourceName = "aws.amazon.com/neuroncore"
)

// Defaults of the overhead model. They are Karpenter's, so that a NodePool
// plans the same nodes under Joiner as under Karpenter.
const (
	// DefaultVMMemoryOverheadPercent is VM_MEMORY_OVERHEAD_PERCENT's default.
	DefaultVMMemoryOverheadPercent = 0.075
	// Arm64CMAReservedMiB is memory an arm64 (Graviton) kernel keeps for its
	// contiguous memory allocator (the EKS AMIs boot with a 64 MiB CMA area),
	// so the kubelet never sees it in the node's capacity. It is taken off
	// before the VM overhead; that is why arm64 types end up 59 MiB, not 64,
	// below an x86_64 type of the same size: the 7.5% overhead of the 64 MiB
	// is not taken again.
	Arm64CMAReservedMiB = 64
	// kubeReservedMiBPerPod and kubeReservedBaseMiB are the kube-reserved
	// memory of the EKS AMIs: 11 MiB per pod the node can hold plus 255 MiB.
	kubeReservedMiBPerPod = 11
	kubeReservedBaseMiB   = 255
	// DefaultMaxPods is the kubelet's default where pods are not limited
	// by the ENIs (Windows).
	DefaultMaxPods = 110
)

var (
	// The kubelet's default hard eviction thresholds on the EKS AMIs.
	defaultEvictionMemory      = resource.MustParse("100Mi")
	defaultEvictionNodeFSRatio = 0.10
	// kube-reserved ephemeral storage of the EKS AMIs.
	defaultKubeReservedStorage = resource.MustParse("1Gi")
	// defaultRootVolume is the root volume of the Linux families, which
	// holds the kubelet's and containerd's directories.
	defaultRootVolume    = resource.MustParse("20Gi")
	defaultWindowsVolume = resource.MustParse("50Gi")
)

// kubeReservedCPU are the kube-reserved CPU bands of the EKS AMIs: 6% of
// the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of
// every core beyond.
var kubeReservedCPU = []struct {
	fromMilli, toMilli int64
	fraction           float64
}{
	{0, 1000, 0.06},
	{1000, 2000, 0.01},
	{2000, 4000, 0.005},
	{4000, math.MaxInt64, 0.0025},
}

// windowsBuilds are the node.kubernetes.io/windows-build values of the
// Windows families.
var windowsBuilds = map[string]string{
	awsv1.AMIFamilyWindows2019: "10.0.17763",
	awsv1.AMIFamilyWindows2022: "10.0.20348",
	awsv1.AMIFamilyWindows2025: "10.0.26100",
}

// Inputs are what, besides the instance type, decides a node's resources.
type Inputs struct {
	// Kubelet is the class's spec.kubelet (nil: none).
	Kubelet *awsv1.KubeletConfiguration
	// AMIFamily is the class's family (EC2NodeClass.AMIFamily()).
	AMIFamily string
	// BlockDeviceMappings and InstanceStorePolicy decide the ephemeral storage.
	BlockDeviceMappings []*awsv1.BlockDeviceMapping
	InstanceStorePolicy *awsv1.InstanceStorePolicy
	// VMMemoryOverheadPercent is VM_MEMORY_OVERHEAD_PERCENT, a fraction (0.075).
	VMMemoryOverheadPercent float64
	// ReservedENIs is RESERVED_ENIS.
	ReservedENIs int
	// NetworkInterfaces are the class's networkInterfaces; nil when it
	// lists none (the instance's default interfaces).
	NetworkInterfaces []awsv1.NetworkInterface
}

// InputsFor are the inputs of a class under the operator's settings.
func InputsFor(nc *awsv1.EC2NodeClass, vmMemoryOverheadPercent float64, reservedENIs int) Inputs {
	return Inputs{
		Kubelet:                 nc.Spec.Kubelet,
		AMIFamily:               nc.AMIFamily(),
		BlockDeviceMappings:     nc.Spec.BlockDeviceMappings,
		InstanceStorePolicy:     nc.Spec.InstanceStorePolicy,
		VMMemoryOverheadPercent: vmMemoryOverheadPercent,
		ReservedENIs:            reservedENIs,
		NetworkInterfaces:       nc.Spec.NetworkInterfaces,
	}
}

// Compute derives a node's labels, capacity and allocatable resources from
// EC2's description of its instance type, the way the kubelet on an EKS AMI
// will report them. The error names the class field that cannot be used.
//
// Labels have no zone, capacity type or region: those vary per offering.
// Capacity's memory is what the kubelet sees, after the VM overhead;
// allocatable is capacity less kube-reserved, system-reserved and the hard
// eviction thresholds. Extended resources with a zero count are left out.
func Compute(info ec2types.InstanceTypeInfo, in Inputs) (labels map[string]string, capacity, allocatable corev1.ResourceList, err error) {
	kubelet := in.Kubelet
	if kubelet == nil {
		kubelet = &awsv1.KubeletConfiguration{}
	}
	family := familyOf(in.AMIFamily)

	labels = computeLabels(info, in.AMIFamily, family)

	storage, err := ephemeralStorage(info, family, in)
	if err != nil {
		return nil, nil, nil, err
	}
	memory := vmMemory(info, in.VMMemoryOverheadPercent)
	pods := podCount(info, family, kubelet, in.ReservedENIs, in.NetworkInterfaces)
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus)), resource.DecimalSI),
		corev1.ResourceMemory:           memory,
		corev1.ResourceEphemeralStorage: storage,
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
	}
	for name, n := range extendedResources(info, family, in.NetworkInterfaces) {
		if n > 0 {
			capacity[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}

	kubeReserved, err := kubeReservedFor(info, family, kubelet, pods, in.NetworkInterfaces)
	if err != nil {
		return nil, nil, nil, err
	}
	systemReserved, err := reservedQuantities("systemReserved", kubelet.SystemReserved)
	if err != nil {
		return nil, nil, nil, err
	}
	eviction, err := evictionThreshold(memory, storage, kubelet.EvictionHard)
	if err != nil {
		return nil, nil, nil, err
	}
	allocatable = capacity.DeepCopy()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		q := allocatable[name]
		for _, overhead := range []corev1.ResourceList{kubeReserved, systemReserved, eviction} {
			if o, ok := overhead[name]; ok {
				q.Sub(o)
			}
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		allocatable[name] = q
	}
	return labels, capacity, allocatable, nil
}

// amiFamily holds what differs between AMI families for resources.
type amiFamily struct {
	windows bool
	// eniLimitedPods: max pods follow the ENIs (the VPC CNI), not 110.
	eniLimitedPods bool
	// eniLimitedMemoryOverhead: kube-reserved memory counts the ENI-limited
	// pods (less RESERVED_ENIS) even when maxPods says otherwise, as the
	// EKS AMIs' bootstrap computes it; Bottlerocket and Windows count the
	// node's own max pods.
	eniLimitedMemoryOverhead bool
	// podsPerCore: the kubelet's podsPerCore caps the pods. Bottlerocket
	// has no such setting.
	podsPerCore bool
	// ephemeralDevice holds the kubelet's directories; defaultVolume is its size.
	ephemeralDevice string
	defaultVolume   resource.Quantity
	custom          bool
}

func familyOf(name string) amiFamily {
	switch name {
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return amiFamily{windows: true, podsPerCore: true, ephemeralDevice: "/dev/sda1", defaultVolume: defaultWindowsVolume}
	case awsv1.AMIFamilyBottlerocket:
		// Bottlerocket's root volume holds the OS; the second, data
		// volume holds the kubelet's and containerd's directories.
		return amiFamily{eniLimitedPods: true, ephemeralDevice: "/dev/xvdb", defaultVolume: defaultRootVolume}
	case awsv1.AMIFamilyCustom:
		return amiFamily{eniLimitedPods: true, eniLimitedMemoryOverhead: true, podsPerCore: true, custom: true, ephemeralDevice: "/dev/xvda", defaultVolume: defaultRootVolume}
	default: // AL2, AL2023
		return amiFamily{eniLimitedPods: true, eniLimitedMemoryOverhead: true, podsPerCore: true, ephemeralDevice: "/dev/xvda", defaultVolume: defaultRootVolume}
	}
}

func computeLabels(info ec2types.InstanceTypeInfo, amiFamilyName string, family amiFamily) map[string]string {
	name := string(info.InstanceType)
	labels := map[string]string{
		corev1.LabelInstanceTypeStable:            name,
		LabelInstanceCPU:                          strconv.Itoa(int(aws.ToInt32(info.VCpuInfo.DefaultVCpus))),
		LabelInstanceMemory:                       strconv.FormatInt(aws.ToInt64(info.MemoryInfo.SizeInMiB), 10),
		LabelInstanceHypervisor:                   string(info.Hypervisor),
		LabelInstanceEncryptionInTransitSupported: strconv.FormatBool(info.NetworkInfo != nil && aws.ToBool(info.NetworkInfo.EncryptionInTransitSupported)),
	}
	arch := architecture(info)
	if arch != "" {
		labels[corev1.LabelArchStable] = arch
	}
	switch {
	case !family.windows:
		labels[corev1.LabelOSStable] = string(corev1.Linux)
	case arch == "amd64":
		// Windows runs on x86_64 only; an arm64 type gets no OS, so no
		// pod can select it.
		labels[corev1.LabelOSStable] = string(corev1.Windows)
		labels[corev1.LabelWindowsBuild] = windowsBuilds[amiFamilyName]
	}
	if familyName, size, ok := strings.Cut(name, "."); ok && !strings.Contains(size, ".") {
		labels[LabelInstanceFamily] = familyName
		labels[LabelInstanceSize] = size
		flex := strings.Contains(familyName, "-flex")
		labels[LabelInstanceCapabilityFlex] = strconv.FormatBool(flex)
		if category, generation, ok := categoryAndGeneration(familyName); ok {
			labels[LabelInstanceCategory] = category
			labels[LabelInstanceGeneration] = generation
		}
	}
	if p := info.ProcessorInfo; p != nil {
		labels[LabelInstanceCPUManufacturer] = kebab(aws.ToString(p.Manufacturer))
		labels[LabelInstanceCPUSustainedClockSpeedMhz] = strconv.Itoa(int(math.Round(aws.ToFloat64(p.SustainedClockSpeedInGhz) * 1000)))
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault {
		labels[LabelInstanceEBSBandwidth] = strconv.Itoa(int(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps)))
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		labels[LabelInstanceLocalNVME] = strconv.FormatInt(*s.TotalSizeInGB, 10)
	}
	// DescribeInstanceTypes has no single bandwidth figure (multi-card
	// types list a baseline per card), so the label comes from the
	// catalog's table of the documented instance bandwidth; a type the
	// catalog does not know goes without it.
	if r, ok := catalog.Lookup(name); ok {
		if bw, ok := r.Labels[LabelInstanceNetworkBandwidth]; ok {
			labels[LabelInstanceNetworkBandwidth] = bw
		}
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) == 1 {
		gpu := g.Gpus[0]
		labels[LabelInstanceGPUName] = kebab(aws.ToString(gpu.Name))
		labels[LabelInstanceGPUManufacturer] = kebab(aws.ToString(gpu.Manufacturer))
		labels[LabelInstanceGPUCount] = strconv.Itoa(int(aws.ToInt32(gpu.Count)))
		if gpu.MemoryInfo != nil {
			labels[LabelInstanceGPUMemory] = strconv.Itoa(int(aws.ToInt32(gpu.MemoryInfo.SizeInMiB)))
		}
	}
	switch {
	case info.NeuronInfo != nil && len(info.NeuronInfo.NeuronDevices) == 1:
		d := info.NeuronInfo.NeuronDevices[0]
		labels[LabelInstanceAcceleratorName] = kebab(aws.ToString(d.Name))
		labels[LabelInstanceAcceleratorManufacturer] = "aws"
		labels[LabelInstanceAcceleratorCount] = strconv.Itoa(int(aws.ToInt32(d.Count)))
	case info.NeuronInfo == nil && info.InferenceAcceleratorInfo != nil && len(info.InferenceAcceleratorInfo.Accelerators) == 1:
		a := info.InferenceAcceleratorInfo.Accelerators[0]
		labels[LabelInstanceAcceleratorName] = kebab(aws.ToString(a.Name))
		labels[LabelInstanceAcceleratorManufacturer] = kebab(aws.ToString(a.Manufacturer))
		labels[LabelInstanceAcceleratorCount] = strconv.Itoa(int(aws.ToInt32(a.Count)))
	}
	return labels
}

// categoryAndGeneration splits a family name: the letters before the first
// digit are the category and that run of digits the generation, skipping a
// "-<n>tb" memory marker between them (u-6tb1: category u, generation 1).
func categoryAndGeneration(family string) (category, generation string, ok bool) {
	i := 0
	for i < len(family) && family[i] >= 'a' && family[i] <= 'z' {
		i++
	}
	category, rest := family[:i], family[i:]
	if category == "" {
		return "", "", false
	}
	if strings.HasPrefix(rest, "-") {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j > 1 && strings.HasPrefix(rest[j:], "tb") {
			rest = rest[j+2:]
		}
	}
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 {
		return "", "", false
	}
	return category, rest[:j], true
}

// architecture is the Kubernetes name of the type's first supported
// architecture that Kubernetes knows, "" when none (the Mac types).
func architecture(info ec2types.InstanceTypeInfo) string {
	if info.ProcessorInfo == nil {
		return ""
	}
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			return "amd64"
		case ec2types.ArchitectureTypeArm64:
			return "arm64"
		}
	}
	return ""
}

func kebab(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "-")) }

// vmMemory is the memory the kubelet will see: the type's memory less the
// arm64 CMA area, less the hypervisor's and firmware's share
// (VM_MEMORY_OVERHEAD_PERCENT, rounded up to a whole MiB).
func vmMemory(info ec2types.InstanceTypeInfo, overheadPercent float64) resource.Quantity {
	mib := aws.ToInt64(info.MemoryInfo.SizeInMiB)
	if architecture(info) == "arm64" {
		mib -= Arm64CMAReservedMiB
	}
	mib -= int64(math.Ceil(float64(mib) * overheadPercent))
	return *resource.NewQuantity(mib*1024*1024, resource.BinarySI)
}

// ephemeralStorage is the size of the volume that holds the kubelet's
// directories: the instance store under RAID0, else the root volume the
// class maps (or, for the family's device, sizes), else the default.
// Windows has no RAID0 setup in its bootstrap, so its nodes keep the root
// volume whatever the policy says; a Custom image's user data is the
// user's, who chose the policy and sets the array up.
func ephemeralStorage(info ec2types.InstanceTypeInfo, family amiFamily, in Inputs) (resource.Quantity, error) {
	if in.InstanceStorePolicy != nil && *in.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 && !family.windows &&
		info.InstanceStorageInfo != nil && info.InstanceStorageInfo.TotalSizeInGB != nil {
		return *resource.NewQuantity(*info.InstanceStorageInfo.TotalSizeInGB*1000*1000*1000, resource.DecimalSI), nil
	}
	bdms := in.BlockDeviceMappings
	for _, b := range bdms {
		if b != nil && b.RootVolume && b.EBS != nil && b.EBS.VolumeSize != nil {
			return *b.EBS.VolumeSize, nil
		}
	}
	if len(bdms) > 0 {
		if family.custom {
			// A custom AMI's root device is unknown: the last mapping is
			// taken as the kubelet's, as Karpenter does.
			if last := bdms[len(bdms)-1]; last != nil && last.EBS != nil && last.EBS.VolumeSize != nil {
				return *last.EBS.VolumeSize, nil
			}
			return family.defaultVolume, nil
		}
		for _, b := range bdms {
			if b != nil && aws.ToString(b.DeviceName) == family.ephemeralDevice && b.EBS != nil && b.EBS.VolumeSize != nil {
				return *b.EBS.VolumeSize, nil
			}
		}
	}
	return family.defaultVolume, nil
}

// kubeReservedResources is the EKS AMIs' kube-reserved, with the class's
// kubeReserved entries in place of the computed ones.
func kubeReservedResources(cpuMilli, pods int64, overrides map[string]string) (corev1.ResourceList, error) {
	var reservedMilli float64
	for _, band := range kubeReservedCPU {
		if cpuMilli <= band.fromMilli {
			break
		}
		reservedMilli += float64(min(cpuMilli, band.toMilli)-band.fromMilli) * band.fraction
	}
	out := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(reservedMilli), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((kubeReservedMiBPerPod*pods+kubeReservedBaseMiB)*1024*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: defaultKubeReservedStorage,
	}
	user, err := reservedQuantities("kubeReserved", overrides)
	if err != nil {
		return nil, err
	}
	for k, v := range user {
		out[k] = v
	}
	return out, nil
}

// reservedQuantities parses spec.kubelet.<field>. A pid entry parses too
// and subtracts from nothing: nodes advertise no pid resource.
func reservedQuantities(field string, values map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for k, v := range values {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("spec.kubelet.%s[%q]: %q is not a quantity; write it like \"500m\" for cpu or \"1Gi\" for memory and ephemeral-storage", field, k, v)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// evictionThreshold is the memory and disk the kubelet keeps free by
// evicting pods: the EKS AMIs' memory.available 100Mi and nodefs.available
// 10%, replaced by the class's evictionHard. Only hard thresholds reduce
// allocatable (the kubelet's Node Allocatable subtracts eviction-hard, not
// eviction-soft, which only starts a grace period), so evictionSoft is not
// counted here.
func evictionThreshold(memory, storage resource.Quantity, hard map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{
		corev1.ResourceMemory:           defaultEvictionMemory,
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storage.Value())*defaultEvictionNodeFSRatio)), resource.DecimalSI),
	}
	for signal, name := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		v, ok := hard[signal]
		if !ok {
			continue
		}
		base := memory
		if name == corev1.ResourceEphemeralStorage {
			base = storage
		}
		q, err := evictionSignal(base, v)
		if err != nil {
			return nil, fmt.Errorf("spec.kubelet.evictionHard[%q]: %w", signal, err)
		}
		out[name] = q
	}
	return out, nil
}

// evictionSignal is a threshold as a quantity: a percentage of capacity
// (100% disables the signal, as in the kubelet) or an absolute quantity.
func evictionSignal(capacity resource.Quantity, value string) (resource.Quantity, error) {
	if pct, ok := strings.CutSuffix(value, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p < 0 || p > 100 {
			return resource.Quantity{}, fmt.Errorf("%q is not a percentage from 0%% to 100%%", value)
		}
		if p == 100 {
			p = 0
		}
		return *resource.NewQuantity(int64(math.Ceil(capacity.AsApproximateFloat64()/100*p)), resource.DecimalSI), nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is neither a quantity (\"500Mi\") nor a percentage (\"10%%\")", value)
	}
	return q, nil
}

// KubeReserved is the kube-reserved of a node of the type: the class's
// kubeReserved entries, and the EKS AMIs' formula for the rest. The launch
// states it in the user data, so the node reserves exactly what planning
// assumed.
func KubeReserved(info ec2types.InstanceTypeInfo, in Inputs) (corev1.ResourceList, error) {
	kubelet := in.Kubelet
	if kubelet == nil {
		kubelet = &awsv1.KubeletConfiguration{}
	}
	family := familyOf(in.AMIFamily)
	return kubeReservedFor(info, family, kubelet, podCount(info, family, kubelet, in.ReservedENIs, in.NetworkInterfaces), in.NetworkInterfaces)
}

// kubeReservedFor sizes kube-reserved. The families with
// eniLimitedMemoryOverhead size its memory by the pods the ENIs allow,
// whatever maxPods says, and, as Karpenter computes it, with no ENI
// reserved (RESERVED_ENIS lowers max pods, not this); the other families
// by the node's max pods.
func kubeReservedFor(info ec2types.InstanceTypeInfo, family amiFamily, kubelet *awsv1.KubeletConfiguration, pods int64, nics []awsv1.NetworkInterface) (corev1.ResourceList, error) {
	reservedPods := pods
	if family.eniLimitedMemoryOverhead {
		reservedPods = eniLimitedPods(info, 0, nics)
	}
	return kubeReservedResources(int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus))*1000, reservedPods, kubelet.KubeReserved)
}
