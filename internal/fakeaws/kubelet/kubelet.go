// Package kubelet computes the Node a kubelet registers on an EC2 instance:
// its labels, taints, capacity and allocatable, from the machine's hardware
// and the kubelet configuration the image's bootstrap read from user data.
//
// Allocatable follows the kubelet's rule, capacity minus kube-reserved,
// system-reserved and the hard eviction threshold, with the reservations the
// EKS images compute when the user data leaves them out. A Node registered
// this way is what Joiner's own prediction of allocatable is checked against.
package kubelet

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws/userdata"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationKwokNode selects the Nodes the local control plane's kwok plays
// the kubelet for, turning them Ready and running their pods.
const AnnotationKwokNode = "kwok.x-k8s.io/node"

// LabelZoneID is the zone ID label the AWS cloud controller manager sets.
const LabelZoneID = "topology.k8s.aws/zone-id"

// Machine is what the kubelet and the cloud controller manager learn about
// the instance they run on.
type Machine struct {
	// Name is the Node's name: the instance's private DNS name.
	Name         string
	ProviderID   string
	InstanceID   string
	InstanceType string
	Region       string
	Zone         string
	ZoneID       string
	PrivateIP    string
	// Arch is Kubernetes' name for the architecture: amd64 or arm64.
	Arch string
	// WindowsBuild is the node.kubernetes.io/windows-build of Windows images.
	WindowsBuild string
	VCPUs        int64
	MemoryMiB    int64
	// MemoryOverheadPercent is the share of the instance's memory the
	// hypervisor and kernel keep: the kubelet reports MemTotal, which is less
	// than the type's nominal memory.
	MemoryOverheadPercent float64
	// ENIMaxPods is the image's default max pods for the type (the ENI
	// limit), used when the user data sets none.
	ENIMaxPods int32
	// EphemeralStorage is the size of the volume the kubelet's root
	// directory lives on: the root volume, Bottlerocket's data volume, or
	// the instance store's array when the user data builds one.
	EphemeralStorage resource.Quantity
	// Extended are device-plugin resources such as nvidia.com/gpu.
	Extended corev1.ResourceList
	// KubeletVersion is reported in the Node's status.
	KubeletVersion string
}

// Node returns the Node the kubelet registers, with the cloud controller
// manager's labels already applied.
func Node(m Machine, cfg *userdata.Config) (*corev1.Node, error) {
	os := "linux"
	if cfg.Family == userdata.Windows {
		os = "windows"
	}
	maxPods := m.ENIMaxPods
	if cfg.MaxPods != nil {
		maxPods = *cfg.MaxPods
	}
	if maxPods <= 0 {
		maxPods = 110
	}
	memKi := int64(float64(m.MemoryMiB*1024) * (1 - m.MemoryOverheadPercent/100))
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(m.VCPUs, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memKi*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: m.EphemeralStorage,
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	for k, v := range m.Extended {
		capacity[k] = v
	}
	kubeReserved := defaultKubeReserved(m.VCPUs, maxPods)
	maps.Copy(kubeReserved, cfg.KubeReserved)
	eviction := cfg.EvictionHard
	if eviction == nil {
		eviction = userdata.DefaultEvictionHard
	}
	allocatable := capacity.DeepCopy()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		q := allocatable[r]
		if v, ok := kubeReserved[r]; ok {
			q.Sub(v)
		}
		if v, ok := cfg.SystemReserved[r]; ok {
			q.Sub(v)
		}
		signal := map[corev1.ResourceName]string{corev1.ResourceMemory: "memory.available", corev1.ResourceEphemeralStorage: "nodefs.available"}[r]
		if th, ok := eviction[signal]; ok {
			v, err := threshold(th, capacity[r])
			if err != nil {
				return nil, fmt.Errorf("eviction threshold %s: %w", signal, err)
			}
			q.Sub(v)
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		allocatable[r] = q
	}

	labels := map[string]string{
		corev1.LabelHostname:      m.Name,
		corev1.LabelOSStable:      os,
		corev1.LabelArchStable:    m.Arch,
		"beta.kubernetes.io/os":   os,
		"beta.kubernetes.io/arch": m.Arch,
	}
	if os == "windows" && m.WindowsBuild != "" {
		labels[corev1.LabelWindowsBuild] = m.WindowsBuild
	}
	maps.Copy(labels, cfg.Labels)
	// The cloud controller manager's labels come last: it owns them.
	for k, v := range map[string]string{
		corev1.LabelInstanceTypeStable:      m.InstanceType,
		corev1.LabelInstanceType:            m.InstanceType,
		corev1.LabelTopologyZone:            m.Zone,
		corev1.LabelTopologyRegion:          m.Region,
		corev1.LabelFailureDomainBetaZone:   m.Zone,
		corev1.LabelFailureDomainBetaRegion: m.Region,
		LabelZoneID:                         m.ZoneID,
	} {
		if v != "" {
			labels[k] = v
		}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Labels:      labels,
			Annotations: map[string]string{AnnotationKwokNode: "fake"},
		},
		Spec: corev1.NodeSpec{ProviderID: m.ProviderID, Taints: append([]corev1.Taint(nil), cfg.Taints...)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    m.Arch,
				OperatingSystem: os,
				KubeletVersion:  m.KubeletVersion,
				MachineID:       strings.ReplaceAll(m.InstanceID, "-", ""),
				SystemUUID:      m.InstanceID,
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: m.PrivateIP},
				{Type: corev1.NodeInternalDNS, Address: m.Name},
				{Type: corev1.NodeHostName, Address: m.Name},
			},
		},
	}
	return node, nil
}

// defaultKubeReserved is what the EKS images reserve for the kubelet and
// container runtime when the user data does not say: CPU by GKE's ladder
// (6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of
// the rest), 11 MiB per pod plus 255 MiB of memory, and 1 GiB of disk.
func defaultKubeReserved(vcpus int64, maxPods int32) corev1.ResourceList {
	milli := int64(0)
	total := vcpus * 1000
	for _, step := range []struct{ from, to, permyriad int64 }{{0, 1000, 600}, {1000, 2000, 100}, {2000, 4000, 50}, {4000, total, 25}} {
		if total > step.from {
			milli += (min(total, step.to) - step.from) * step.permyriad / 10000
		}
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(milli, resource.DecimalSI),
		corev1.ResourceMemory:           resource.MustParse(strconv.Itoa(11*int(maxPods)+255) + "Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
}

// threshold turns an eviction threshold (a quantity or a percentage of
// capacity) into a quantity.
func threshold(v string, capacity resource.Quantity) (resource.Quantity, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return resource.Quantity{}, fmt.Errorf("invalid percentage %q", v)
		}
		return *resource.NewQuantity(int64(float64(capacity.Value())*f/100), resource.BinarySI), nil
	}
	return resource.ParseQuantity(v)
}
