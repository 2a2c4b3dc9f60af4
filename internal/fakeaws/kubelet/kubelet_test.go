package kubelet

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws/userdata"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func int32p(n int32) *int32 { return &n }

func m5large() Machine {
	return Machine{
		Name: "ip-10-0-1-2.ec2.internal", ProviderID: "aws:///us-east-1a/i-0123", InstanceID: "i-0123",
		InstanceType: "m5.large", Region: "us-east-1", Zone: "us-east-1a", ZoneID: "use1-az1", PrivateIP: "10.0.1.2",
		Arch: "amd64", VCPUs: 2, MemoryMiB: 8192, ENIMaxPods: 29, EphemeralStorage: resource.MustParse("20Gi"),
	}
}

func TestNodeResources(t *testing.T) {
	big := m5large()
	big.InstanceType, big.VCPUs, big.MemoryMiB, big.ENIMaxPods = "m5.24xlarge", 96, 393216, 737
	overhead := m5large()
	overhead.MemoryOverheadPercent = 5
	gpu := m5large()
	gpu.Extended = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}

	tests := []struct {
		name        string
		m           Machine
		cfg         userdata.Config
		capacity    map[corev1.ResourceName]string
		allocatable map[corev1.ResourceName]string
	}{
		{
			name: "image defaults: ENI max pods, computed kube-reserved, default eviction",
			m:    m5large(), cfg: userdata.Config{Family: userdata.AL2023},
			capacity:    map[corev1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "29", "ephemeral-storage": "20Gi"},
			allocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7518Mi", "pods": "29", "ephemeral-storage": "17Gi"},
		},
		{
			name: "cpu reservation ladder on 96 vCPUs",
			m:    big, cfg: userdata.Config{Family: userdata.AL2023, MaxPods: int32p(110)},
			capacity:    map[corev1.ResourceName]string{"cpu": "96", "pods": "110"},
			allocatable: map[corev1.ResourceName]string{"cpu": "95690m", "memory": "391651Mi", "pods": "110"},
		},
		{
			name: "user data reservations and percentage eviction",
			m:    m5large(),
			cfg: userdata.Config{
				Family: userdata.AL2, MaxPods: int32p(58),
				KubeReserved:   corev1.ResourceList{"cpu": resource.MustParse("80m"), "memory": resource.MustParse("893Mi")},
				SystemReserved: corev1.ResourceList{"memory": resource.MustParse("100Mi"), "cpu": resource.MustParse("20m")},
				EvictionHard:   map[string]string{"memory.available": "5%", "nodefs.available": "1Gi"},
			},
			capacity: map[corev1.ResourceName]string{"pods": "58"},
			// 8192Mi - 893Mi - 100Mi - 409.6Mi; 20Gi - 1Gi (default) - 1Gi.
			allocatable: map[corev1.ResourceName]string{"cpu": "1900m", "memory": "7119201895", "pods": "58", "ephemeral-storage": "18Gi"},
		},
		{
			name: "memory the kernel keeps is not capacity",
			m:    overhead, cfg: userdata.Config{Family: userdata.AL2023},
			capacity:    map[corev1.ResourceName]string{"memory": "7969177Ki"},
			allocatable: map[corev1.ResourceName]string{},
		},
		{
			name: "device plugin resources pass through",
			m:    gpu, cfg: userdata.Config{Family: userdata.AL2023},
			capacity:    map[corev1.ResourceName]string{"nvidia.com/gpu": "1"},
			allocatable: map[corev1.ResourceName]string{"nvidia.com/gpu": "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Node(tt.m, &tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for r, want := range tt.capacity {
				if got := n.Status.Capacity[r]; got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("capacity %s = %s, want %s", r, got.String(), want)
				}
			}
			for r, want := range tt.allocatable {
				if got := n.Status.Allocatable[r]; got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("allocatable %s = %s, want %s", r, got.String(), want)
				}
			}
		})
	}
}

func TestNodeLabelsAndTaints(t *testing.T) {
	cfg := &userdata.Config{
		Family: userdata.Bottlerocket,
		Labels: map[string]string{"karpenter.sh/nodepool": "default", corev1.LabelInstanceTypeStable: "lie.large"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
	}
	n, err := Node(m5large(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"karpenter.sh/nodepool":        "default",
		corev1.LabelInstanceTypeStable: "m5.large", // the cloud controller manager's value wins
		corev1.LabelTopologyZone:       "us-east-1a",
		corev1.LabelTopologyRegion:     "us-east-1",
		LabelZoneID:                    "use1-az1",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelOSStable:           "linux",
		corev1.LabelHostname:           "ip-10-0-1-2.ec2.internal",
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Spec.ProviderID != "aws:///us-east-1a/i-0123" || n.Name != "ip-10-0-1-2.ec2.internal" {
		t.Errorf("providerID %q name %q", n.Spec.ProviderID, n.Name)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != cfg.Taints[0] {
		t.Errorf("taints = %v, want %v", n.Spec.Taints, cfg.Taints)
	}
	if n.Annotations[AnnotationKwokNode] != "fake" {
		t.Errorf("annotations = %v, want %s=fake", n.Annotations, AnnotationKwokNode)
	}
	win := &userdata.Config{Family: userdata.Windows}
	m := m5large()
	m.WindowsBuild = "10.0.20348"
	if n, _ = Node(m, win); n.Labels[corev1.LabelOSStable] != "windows" || n.Labels[corev1.LabelWindowsBuild] != "10.0.20348" {
		t.Errorf("windows labels = %v", n.Labels)
	}
}
