package amifamily

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// Input is what a node needs to join the cluster, as user data carries it.
type Input struct {
	ClusterName     string
	ClusterEndpoint string
	// CABundle is the cluster's CA certificate, base64-encoded PEM
	// (CLUSTER_CA_BUNDLE or DescribeCluster's certificateAuthority.data).
	CABundle string
	// ClusterCIDR is the service CIDR; nodeadm needs it (AL2023).
	ClusterCIDR string
	// ClusterDNS is the cluster DNS service IP(s), used when the class's
	// kubelet does not set clusterDNS.
	ClusterDNS []string
	// Labels are registered by the kubelet; labels the kubelet may not set
	// on itself (node-restriction domains) are left out, since the kubelet
	// would refuse to start with them.
	Labels map[string]string
	// Taints and StartupTaints are both registered by the kubelet, so that
	// no pod lands before the node is what the scheduler planned.
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// Kubelet is the class's kubelet configuration.
	Kubelet *awsv1.KubeletConfiguration
	// MaxPods is the pod limit the caller computed for the instance type,
	// used when Kubelet does not set maxPods; 0 leaves it to the AMI.
	MaxPods int32
	// CustomUserData is spec.userData, merged as each family allows.
	CustomUserData *string
	// InstanceStoreRAID0 is spec.instanceStorePolicy: RAID0. The scheduler
	// planned the node's ephemeral storage as the instance store's size, so
	// the image must stripe the NVMe disks and move the kubelet's and
	// containerd's directories onto them; without it the pods planned for
	// that space would never fit on the root volume.
	InstanceStoreRAID0 bool
}

// UserData is the base64 user data of a launch template for the family.
// It is a pure function of its input, so equal inputs give equal launch
// template names. Bad spec.userData gives an error that names the field.
func UserData(family string, in Input) (string, error) {
	if in.CABundle != "" {
		if _, err := base64.StdEncoding.DecodeString(in.CABundle); err != nil {
			return "", fmt.Errorf("the cluster CA bundle (CLUSTER_CA_BUNDLE) is not base64: %w", err)
		}
	}
	var (
		script string
		err    error
	)
	switch family {
	case awsv1.AMIFamilyAL2023:
		script, err = nodeadmUserData(in)
	case awsv1.AMIFamilyAL2:
		script, err = bootstrapUserData(in)
	case awsv1.AMIFamilyBottlerocket:
		script, err = bottlerocketUserData(in)
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		script = windowsUserData(in)
	case awsv1.AMIFamilyCustom:
		// The user's image, the user's bootstrap: Joiner adds nothing.
		if in.CustomUserData != nil {
			script = *in.CustomUserData
		}
	default:
		return "", fmt.Errorf("spec.amiFamily %q is not one of AL2, AL2023, Bottlerocket, Windows2019, Windows2022, Windows2025, Custom", family)
	}
	if err != nil {
		return "", err
	}
	if len(script) > MaxUserData {
		return "", &TooLargeError{Size: len(script), Err: userDataError("with the cluster's settings, labels and taints the user data is %d bytes, over EC2's limit of %d (16 KB, before base64); shorten spec.userData", len(script), MaxUserData)}
	}
	return base64.StdEncoding.EncodeToString([]byte(script)), nil
}

// TooLargeError is user data over MaxUserData, with its size.
type TooLargeError struct {
	Size int
	Err  error
}

func (e *TooLargeError) Error() string { return e.Err.Error() }
func (e *TooLargeError) Unwrap() error { return e.Err }

// MaxUserData is EC2's limit on user data, in bytes before base64: a
// launch template with more is refused, so no node of the class could
// start.
const MaxUserData = 16 * 1024

// userDataError names the field a user fixes.
func userDataError(format string, args ...any) error {
	return fmt.Errorf("spec.userData: "+format, args...)
}

// clusterDNS is the class's clusterDNS, else the cluster's.
func (in Input) clusterDNS() []string {
	if in.Kubelet != nil && len(in.Kubelet.ClusterDNS) > 0 {
		return in.Kubelet.ClusterDNS
	}
	return in.ClusterDNS
}

// maxPods is the class's maxPods, else the caller's; 0 means unset.
func (in Input) maxPods() int32 {
	if in.Kubelet != nil && in.Kubelet.MaxPods != nil {
		return *in.Kubelet.MaxPods
	}
	return in.MaxPods
}

func (in Input) ipv6() bool {
	dns := in.clusterDNS()
	if len(dns) == 0 {
		return false
	}
	ip := net.ParseIP(dns[0])
	return ip != nil && ip.To4() == nil
}

// taints are the taints and startup taints, once each, in a stable order.
func (in Input) taints() []corev1.Taint {
	seen := map[string]bool{}
	var out []corev1.Taint
	for _, t := range append(append([]corev1.Taint{}, in.Taints...), in.StartupTaints...) {
		key := t.Key + "=" + t.Value + ":" + string(t.Effect)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// labels are the labels the kubelet may register, sorted by key.
func (in Input) labels() [][2]string {
	var out [][2]string
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		if kubeletMaySet(k) {
			out = append(out, [2]string{k, in.Labels[k]})
		}
	}
	return out
}

// kubeletLabels are the labels the kubelet may set on its own node under
// the NodeRestriction admission plugin; with any other kubernetes.io or
// k8s.io label in --node-labels the kubelet exits at start.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname":                   true,
	"kubernetes.io/arch":                       true,
	"kubernetes.io/os":                         true,
	"node.kubernetes.io/instance-type":         true,
	"beta.kubernetes.io/instance-type":         true,
	"beta.kubernetes.io/os":                    true,
	"beta.kubernetes.io/arch":                  true,
	"topology.kubernetes.io/zone":              true,
	"topology.kubernetes.io/region":            true,
	"failure-domain.beta.kubernetes.io/zone":   true,
	"failure-domain.beta.kubernetes.io/region": true,
}

func kubeletMaySet(key string) bool {
	namespace, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	in := func(domain string) bool { return namespace == domain || strings.HasSuffix(namespace, "."+domain) }
	if !in("kubernetes.io") && !in("k8s.io") {
		return true
	}
	return kubeletLabels[key] || in("kubelet.kubernetes.io") || in("node.kubernetes.io")
}

// nodeLabelsFlag is the kubelet's --node-labels flag. It is not quoted:
// nodeadm hands each flag to the kubelet as one argument, and quotes would
// reach the kubelet as part of the first label's key. Label keys and values
// cannot hold spaces, so bootstrap.sh's word splitting needs none either.
func (in Input) nodeLabelsFlag() string {
	labels := in.labels()
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l[0]+"="+l[1])
	}
	return "--node-labels=" + strings.Join(parts, ",")
}

// taintString is a taint as --register-with-taints and Bottlerocket write
// it: "key=value:Effect", or "key:Effect" without a value.
func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// kubeletFlags are the kubelet command-line flags for the families whose
// bootstrap scripts take them (AL2's bootstrap.sh, Windows'
// Start-EKSBootstrap.ps1): labels, taints, max pods and the class's
// kubelet settings, each map in key order so the script is stable.
func (in Input) kubeletFlags() []string {
	var args []string
	if f := in.nodeLabelsFlag(); f != "" {
		args = append(args, f)
	}
	if taints := in.taints(); len(taints) > 0 {
		parts := make([]string, 0, len(taints))
		for _, t := range taints {
			parts = append(parts, taintString(t))
		}
		args = append(args, "--register-with-taints="+strings.Join(parts, ","))
	}
	if n := in.maxPods(); n > 0 {
		args = append(args, fmt.Sprintf("--max-pods=%d", n))
	}
	k := in.Kubelet
	if k == nil {
		return args
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	joined := func(flag string, m map[string]string, sep string) {
		if len(m) == 0 {
			return
		}
		parts := make([]string, 0, len(m))
		for _, key := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, key+sep+m[key])
		}
		args = append(args, fmt.Sprintf("%s=%q", flag, strings.Join(parts, ",")))
	}
	joined("--system-reserved", k.SystemReserved, "=")
	joined("--kube-reserved", k.KubeReserved, "=")
	joined("--eviction-hard", k.EvictionHard, "<")
	joined("--eviction-soft", k.EvictionSoft, "<")
	grace := map[string]string{}
	for key, d := range k.EvictionSoftGracePeriod {
		grace[key] = d.Duration.String()
	}
	joined("--eviction-soft-grace-period", grace, "=")
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

// shellQuote single-quotes s for a POSIX shell or PowerShell argument.
func shellQuote(s string, powershell bool) string {
	if powershell {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
