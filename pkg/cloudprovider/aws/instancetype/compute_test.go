package instancetype

import (
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

var (
	motoInfosOnce sync.Once
	motoInfos     map[string]ec2types.InstanceTypeInfo
)

// motoInfo is moto's record of one instance type.
func motoInfo(t *testing.T, name string) ec2types.InstanceTypeInfo {
	t.Helper()
	motoInfosOnce.Do(func() {
		motoInfos = map[string]ec2types.InstanceTypeInfo{}
		for _, info := range readInfos(t, motoTestdata) {
			motoInfos[string(info.InstanceType)] = info
		}
	})
	info, ok := motoInfos[name]
	if !ok {
		t.Fatalf("moto does not describe %s", name)
	}
	return info
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

func bdm(device string, size string, root bool) *awsv1.BlockDeviceMapping {
	b := &awsv1.BlockDeviceMapping{RootVolume: root, EBS: &awsv1.BlockDevice{}}
	if device != "" {
		b.DeviceName = aws.String(device)
	}
	if size != "" {
		v := q(size)
		b.EBS.VolumeSize = &v
	}
	return b
}

// TestComputeOverrides drives Compute through the class's settings. The
// wanted numbers are worked out by hand from m5.large (2 vCPUs, 8192 MiB,
// 3 ENIs of 10 IPv4 addresses: 29 pods; 7577 MiB after the 7.5% overhead),
// whose defaults are 1930m CPU, 6903Mi memory, 29 pods and 17Gi storage.
func TestComputeOverrides(t *testing.T) {
	raid0 := awsv1.InstanceStorePolicyRAID0
	cases := []struct {
		name     string
		typ      string
		in       Inputs
		capacity map[corev1.ResourceName]string
		alloc    map[corev1.ResourceName]string
		labels   map[string]string // "" value: label absent
		wantErr  string
	}{
		{name: "defaults", typ: "m5.large", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023},
			capacity: map[corev1.ResourceName]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi", "vpc.amazonaws.com/pod-eni": "9"},
			alloc:    map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"},
			labels:   map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node.kubernetes.io/windows-build": ""}},
		// The EKS AMIs size kube-reserved memory by the ENI-limited pods
		// (11Mi x 29 + 255Mi), whatever maxPods says.
		{name: "maxPods raises pods, not kube-reserved memory", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}},
			alloc: map[corev1.ResourceName]string{"pods": "110", "memory": "6903Mi"}},
		{name: "Custom sizes kube-reserved memory as AL2023", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyCustom, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}},
			alloc: map[corev1.ResourceName]string{"pods": "110", "memory": "6903Mi"}},
		{name: "podsPerCore caps pods at 4 x 2 vCPUs", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}},
			alloc: map[corev1.ResourceName]string{"pods": "8", "memory": "6903Mi"}},
		{name: "the lower of maxPods and podsPerCore", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(20), PodsPerCore: aws.Int32(20)}},
			alloc: map[corev1.ResourceName]string{"pods": "20"}},
		{name: "kubeReserved replaces the computed entries, pid subtracts nothing", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "200m", "memory": "1Gi", "ephemeral-storage": "3Gi", "pid": "100"}}},
			alloc: map[corev1.ResourceName]string{"cpu": "1800m", "memory": "6453Mi", "ephemeral-storage": "15Gi"}},
		{name: "systemReserved comes off as well", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"}}},
			alloc: map[corev1.ResourceName]string{"cpu": "1830m", "memory": "6703Mi", "ephemeral-storage": "16Gi"}},
		{name: "evictionHard percentages of capacity", typ: "m5.large",
			in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "15%"}}},
			// 7003Mi less ceil(5% of 7577Mi) bytes; 19Gi less 15% of 20Gi.
			alloc: map[corev1.ResourceName]string{"memory": "6945924710", "ephemeral-storage": "16Gi"}},
		{name: "evictionHard quantity", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "500Mi"}}},
			alloc: map[corev1.ResourceName]string{"memory": "6503Mi", "ephemeral-storage": "17Gi"}},
		{name: "evictionHard 100% disables the signal", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"nodefs.available": "100%"}}},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "19Gi"}},
		{name: "evictionSoft does not reduce allocatable", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "1Gi", "nodefs.available": "50%"}}},
			alloc: map[corev1.ResourceName]string{"memory": "6903Mi", "ephemeral-storage": "17Gi"}},
		{name: "the root volume of blockDeviceMappings", typ: "m5.large",
			in:       Inputs{AMIFamily: awsv1.AMIFamilyAL2023, BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "30Gi", false), bdm("/dev/xvdc", "100Gi", true)}},
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "100Gi"},
			alloc:    map[corev1.ResourceName]string{"ephemeral-storage": "89Gi"}},
		{name: "the family's device when no volume is marked root", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "50Gi", false)}},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "44Gi"}},
		{name: "another device is not the kubelet's", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvdb", "50Gi", false)}},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "17Gi"}},
		{name: "Bottlerocket keeps the kubelet on its data volume", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyBottlerocket, BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "4Gi", false), bdm("/dev/xvdb", "50Gi", false)}},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "44Gi"}},
		{name: "Custom takes the last mapping", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyCustom, BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "100Gi", false), bdm("/dev/sdf", "30Gi", false)}},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "26Gi"}},
		{name: "RAID0 uses the instance store", typ: "c5d.large",
			in:       Inputs{AMIFamily: awsv1.AMIFamilyAL2023, InstanceStorePolicy: &raid0},
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "50G"},
			alloc:    map[corev1.ResourceName]string{"ephemeral-storage": "43926258176"},
			labels:   map[string]string{LabelInstanceLocalNVME: "50"}},
		{name: "RAID0 on Windows keeps the root volume: its bootstrap builds no array", typ: "c5d.large",
			in:       Inputs{AMIFamily: awsv1.AMIFamilyWindows2022, InstanceStorePolicy: &raid0},
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "50Gi"}},
		{name: "RAID0 without an instance store keeps the root volume", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, InstanceStorePolicy: &raid0},
			alloc: map[corev1.ResourceName]string{"ephemeral-storage": "17Gi"}},
		// kube-reserved memory counts every ENI, as Karpenter's does.
		{name: "a reserved ENI holds no pods", typ: "m5.large", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023, ReservedENIs: 1},
			alloc: map[corev1.ResourceName]string{"pods": "20", "memory": "6903Mi"}},
		// kube-reserved memory counts 688 pods too: 49 fewer than the
		// 737 of the type's ENIs, 539Mi more allocatable.
		{name: "an efa-only interface on card 0 holds no pods, and the EFAs are those listed", typ: "c5n.18xlarge",
			in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023, NetworkInterfaces: []awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}, {NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: "efa-only"}}},
			capacity: map[corev1.ResourceName]string{"vpc.amazonaws.com/efa": "1"},
			alloc:    map[corev1.ResourceName]string{"pods": "688", "memory": "173939Mi"}},
		{name: "interfaces listed without efa-only: no EFA", typ: "c5n.18xlarge",
			in:       Inputs{AMIFamily: awsv1.AMIFamilyAL2023, NetworkInterfaces: []awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}}},
			capacity: map[corev1.ResourceName]string{"vpc.amazonaws.com/efa": ""}},
		{name: "no interfaces listed: the type's EFAs", typ: "c5n.18xlarge", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023},
			capacity: map[corev1.ResourceName]string{"vpc.amazonaws.com/efa": "1"},
			alloc:    map[corev1.ResourceName]string{"pods": "737"}},
		{name: "all ENIs reserved", typ: "m5.large", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023, ReservedENIs: 3},
			alloc: map[corev1.ResourceName]string{"pods": "0"}},
		{name: "VM_MEMORY_OVERHEAD_PERCENT", typ: "m5.large", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023, VMMemoryOverheadPercent: 0.1},
			capacity: map[corev1.ResourceName]string{"memory": "7372Mi"},
			alloc:    map[corev1.ResourceName]string{"memory": "6698Mi"}},
		{name: "arm64 loses the CMA area before the overhead", typ: "m6g.large", in: Inputs{AMIFamily: awsv1.AMIFamilyAL2023},
			// (8192 - 64) - ceil(8128 x 0.075) = 7518; less 574 and 100.
			capacity: map[corev1.ResourceName]string{"memory": "7518Mi"},
			alloc:    map[corev1.ResourceName]string{"memory": "6844Mi"},
			labels:   map[string]string{"kubernetes.io/arch": "arm64"}},
		// Bottlerocket counts its own max pods (11Mi x 110 + 255Mi), and
		// has no podsPerCore.
		{name: "Bottlerocket sizes kube-reserved memory by its max pods", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyBottlerocket, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}},
			alloc: map[corev1.ResourceName]string{"pods": "110", "memory": "6012Mi"}},
		{name: "Bottlerocket ignores podsPerCore", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyBottlerocket, Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}},
			alloc: map[corev1.ResourceName]string{"pods": "29", "memory": "6903Mi"}},
		{name: "Windows: 110 pods, a 50Gi volume, its own IPv4 resource", typ: "m5.large",
			in:       Inputs{AMIFamily: awsv1.AMIFamilyWindows2022},
			capacity: map[corev1.ResourceName]string{"vpc.amazonaws.com/PrivateIPv4Address": "9", "ephemeral-storage": "50Gi"},
			alloc:    map[corev1.ResourceName]string{"pods": "110", "memory": "6012Mi", "ephemeral-storage": "44Gi"},
			labels:   map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}},
		{name: "Windows: podsPerCore caps pods, and kube-reserved memory with them", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyWindows2022, Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}},
			alloc: map[corev1.ResourceName]string{"pods": "8", "memory": "7134Mi"}},
		{name: "RESERVED_ENIS leaves kube-reserved memory alone under maxPods too", typ: "m5.large",
			in:    Inputs{AMIFamily: awsv1.AMIFamilyAL2023, ReservedENIs: 1, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}},
			alloc: map[corev1.ResourceName]string{"pods": "110", "memory": "6903Mi"}},
		{name: "Windows has no arm64", typ: "m6g.large", in: Inputs{AMIFamily: awsv1.AMIFamilyWindows2019},
			labels: map[string]string{"kubernetes.io/os": "", "kubernetes.io/arch": "arm64"}},
		{name: "a kubeReserved value that is no quantity", typ: "m5.large",
			in:      Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"memory": "lots"}}},
			wantErr: `spec.kubelet.kubeReserved["memory"]: "lots" is not a quantity`},
		{name: "a systemReserved value that is no quantity", typ: "m5.large",
			in:      Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "x"}}},
			wantErr: `spec.kubelet.systemReserved["cpu"]: "x" is not a quantity`},
		{name: "an evictionHard percentage out of range", typ: "m5.large",
			in:      Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "120%"}}},
			wantErr: `spec.kubelet.evictionHard["memory.available"]: "120%" is not a percentage`},
		{name: "an evictionHard value that is neither", typ: "m5.large",
			in:      Inputs{AMIFamily: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]string{"nodefs.available": "ten"}}},
			wantErr: `spec.kubelet.evictionHard["nodefs.available"]: "ten" is neither a quantity`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.VMMemoryOverheadPercent == 0 {
				in.VMMemoryOverheadPercent = DefaultVMMemoryOverheadPercent
			}
			labels, capacity, alloc, err := Compute(motoInfo(t, tc.typ), in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
				for name, w := range want {
					g, ok := got[name]
					if w == "" { // absent: a zero count is left out
						if ok {
							t.Errorf("%s %s = %s, want none", what, name, g.String())
						}
						continue
					}
					if !ok || g.Cmp(q(w)) != 0 {
						t.Errorf("%s %s = %s (present %v), want %s", what, name, g.String(), ok, w)
					}
				}
			}
			check("capacity", capacity, tc.capacity)
			check("allocatable", alloc, tc.alloc)
			for k, w := range tc.labels {
				if g, ok := labels[k]; g != w || ok != (w != "") {
					t.Errorf("label %s = %q (present %v), want %q", k, g, ok, w)
				}
			}
		})
	}
}

func TestCategoryAndGeneration(t *testing.T) {
	for _, tc := range []struct{ family, category, generation string }{
		{"m5", "m", "5"}, {"c7i-flex", "c", "7"}, {"inf2", "inf", "2"}, {"u-6tb1", "u", "1"},
		{"u7in-16tb", "u", "7"}, {"p6-b200", "p", "6"}, {"x2iezn", "x", "2"}, {"hpc7g", "hpc", "7"},
		{"mac", "", ""}, {"5x", "", ""},
	} {
		c, g, ok := categoryAndGeneration(tc.family)
		if c != tc.category || g != tc.generation || ok != (tc.category != "") {
			t.Errorf("categoryAndGeneration(%q) = %q, %q, %v; want %q, %q", tc.family, c, g, ok, tc.category, tc.generation)
		}
	}
}
