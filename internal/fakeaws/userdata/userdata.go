// Package userdata reads an EC2 instance's user data the way each EKS node
// image does at boot: AL2023's nodeadm (a MIME multipart document with
// NodeConfig parts), AL2's /etc/eks/bootstrap.sh invocation, Bottlerocket's
// TOML settings and the Windows Start-EKSBootstrap.ps1 call.
//
// It exists so the local AWS endpoint can register a Node exactly as the
// kubelet on that image would: whatever Joiner writes into a launch template
// is what the Node gets, and user data a real node could not read fails here
// with the reason the node would log.
package userdata

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Family is the node image family whose bootstrap reads the user data.
type Family string

// The families of the EKS-optimized images.
const (
	AL2023       Family = "al2023"
	AL2          Family = "al2"
	Bottlerocket Family = "bottlerocket"
	Windows      Family = "windows"
)

// Config is what a node's bootstrap takes from the user data: how to reach
// the cluster and how to configure its kubelet.
type Config struct {
	Family Family
	// ClusterName, APIServerEndpoint and CertificateAuthority (PEM, decoded)
	// say which cluster the node joins.
	ClusterName          string
	APIServerEndpoint    string
	CertificateAuthority []byte
	// DescribesCluster is set when the bootstrap asks EKS DescribeCluster for
	// the endpoint and CA because the user data left them out (AL2 only).
	DescribesCluster bool
	// ClusterCIDR is nodeadm's spec.cluster.cidr (the service CIDR).
	ClusterCIDR string
	ClusterDNS  []string
	// MaxPods is nil when the image picks its own (the ENI limit).
	MaxPods        *int32
	Labels         map[string]string
	Taints         []corev1.Taint
	KubeReserved   corev1.ResourceList
	SystemReserved corev1.ResourceList
	// LocalStorage is how the bootstrap sets up the instance store disks
	// for the kubelet: "" leaves them alone, so the kubelet's directory
	// stays on the root volume.
	LocalStorage LocalStorage
	// EvictionHard maps a signal (memory.available, nodefs.available, ...)
	// to a quantity or a percentage, as the kubelet's configuration does.
	EvictionHard map[string]string
}

// LocalStorage is an instance store strategy, in nodeadm's words.
type LocalStorage string

// The strategies the images offer. RAID0 stripes every disk into one
// volume; RAID10 mirrors pairs of stripes, so the volume is half the disks;
// Mount mounts each disk on its own and leaves the kubelet on the root
// volume.
const (
	LocalStorageRAID0  LocalStorage = "RAID0"
	LocalStorageRAID10 LocalStorage = "RAID10"
	LocalStorageMount  LocalStorage = "Mount"
)

// Decode reads raw (the user data, already base64-decoded) as family's
// bootstrap does.
func Decode(family Family, raw []byte) (*Config, error) {
	var (
		c   *Config
		err error
	)
	switch family {
	case AL2023:
		c, err = decodeNodeadm(raw)
	case AL2:
		c, err = decodeEKSBootstrap(raw)
	case Bottlerocket:
		c, err = decodeBottlerocket(raw)
	case Windows:
		c, err = decodeWindows(raw)
	default:
		return nil, fmt.Errorf("unknown image family %q", family)
	}
	if err != nil {
		return nil, err
	}
	c.Family = family
	return c, nil
}

// Sniff guesses the family from the content, for images the endpoint did not
// publish itself (custom AMIs): a real node would run whatever bootstrap its
// image has, and the content is the best hint of which one that is.
func Sniff(raw []byte) Family {
	s := string(raw)
	switch {
	case strings.Contains(s, "application/node.eks.aws") || strings.Contains(s, "node.eks.aws/v1alpha1"):
		return AL2023
	case strings.Contains(s, "/etc/eks/bootstrap.sh"):
		return AL2
	case strings.Contains(s, "<powershell>"):
		return Windows
	case strings.Contains(s, "[settings"):
		return Bottlerocket
	}
	return ""
}

// kubeletFlags applies the kubelet command-line flags the node images pass
// through (nodeadm's spec.kubelet.flags, bootstrap.sh's --kubelet-extra-args,
// Start-EKSBootstrap's -KubeletExtraArgs). Flags win over the configuration
// file, as they do in the kubelet. Flags it does not model are accepted and
// ignored, as the kubelet would run with them.
func (c *Config) kubeletFlags(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			return fmt.Errorf("kubelet: unexpected argument %q (flags must start with --)", a)
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue {
			switch name {
			case "node-labels", "register-with-taints", "max-pods", "kube-reserved", "system-reserved", "eviction-hard", "cluster-dns":
				if i+1 >= len(args) {
					return fmt.Errorf("kubelet: flag needs an argument: --%s", name)
				}
				i++
				value = args[i]
			default:
				// A boolean flag, or one whose value follows; either way not ours.
				continue
			}
		}
		var err error
		switch name {
		case "node-labels":
			var labels map[string]string
			if labels, err = parseMap(value, "="); err == nil {
				err = validateNodeLabels(labels)
			}
			if err == nil {
				if c.Labels == nil {
					c.Labels = map[string]string{}
				}
				for k, v := range labels {
					c.Labels[k] = v
				}
			}
		case "register-with-taints":
			c.Taints, err = ParseTaints(value)
		case "max-pods":
			var n int32
			if _, err = fmt.Sscanf(value, "%d", &n); err == nil && fmt.Sprint(n) == value {
				c.MaxPods = &n
			} else {
				err = fmt.Errorf("invalid value %q", value)
			}
		case "kube-reserved":
			c.KubeReserved, err = parseResourceFlag(value)
		case "system-reserved":
			c.SystemReserved, err = parseResourceFlag(value)
		case "eviction-hard":
			var m map[string]string
			if m, err = parseMap(value, "<"); err == nil {
				err = validateEviction(m)
				c.EvictionHard = m
			}
		case "cluster-dns":
			c.ClusterDNS = strings.Split(value, ",")
		}
		if err != nil {
			return fmt.Errorf("kubelet: invalid argument %q for \"--%s\" flag: %w", value, name, err)
		}
	}
	return nil
}

// parseMap reads "k1<sep>v1,k2<sep>v2", the kubelet's map flag syntax.
func parseMap(s, sep string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, sep)
		if !ok {
			return nil, fmt.Errorf("%q is not of the form key%svalue", kv, sep)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func parseResourceFlag(s string) (corev1.ResourceList, error) {
	m, err := parseMap(s, "=")
	if err != nil {
		return nil, err
	}
	return resourceList(m)
}

// resourceList parses reserved resources; the kubelet accepts only these.
func resourceList(m map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for k, v := range m {
		switch corev1.ResourceName(k) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid":
		default:
			return nil, fmt.Errorf("unsupported reserved resource %q (cpu, memory, ephemeral-storage or pid)", k)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: negative quantity %s", k, v)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// evictionSignals are the signals the kubelet knows for hard eviction.
var evictionSignals = map[string]bool{
	"memory.available": true, "nodefs.available": true, "nodefs.inodesFree": true,
	"imagefs.available": true, "imagefs.inodesFree": true, "containerfs.available": true,
	"containerfs.inodesFree": true, "pid.available": true, "allocatableMemory.available": true,
}

func validateEviction(m map[string]string) error {
	for k, v := range m {
		if !evictionSignals[k] {
			return fmt.Errorf("unsupported eviction signal %q", k)
		}
		if p, ok := strings.CutSuffix(v, "%"); ok {
			var f float64
			if _, err := fmt.Sscanf(p, "%g", &f); err != nil || f < 0 || f > 100 {
				return fmt.Errorf("eviction threshold %s: invalid percentage %q", k, v)
			}
			continue
		}
		if _, err := resource.ParseQuantity(v); err != nil {
			return fmt.Errorf("eviction threshold %s: %w", k, err)
		}
	}
	return nil
}

// kubeletLabels are the labels in the kubernetes.io and k8s.io namespaces a
// kubelet may set on its own Node; any other label there stops the kubelet
// at start ("unknown 'kubernetes.io' or 'k8s.io' labels specified with
// --node-labels").
var kubeletLabels = map[string]bool{
	corev1.LabelHostname: true, corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true,
	corev1.LabelFailureDomainBetaZone: true, corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType: true, corev1.LabelInstanceTypeStable: true,
	corev1.LabelOSStable: true, corev1.LabelArchStable: true,
	"beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
	corev1.LabelWindowsBuild: true,
}

func validateNodeLabels(labels map[string]string) error {
	var bad []string
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("invalid label value %q for %q: %s", v, k, strings.Join(errs, "; "))
		}
		if restrictedLabel(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v", bad)
	}
	return nil
}

func restrictedLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	inK8s := func(d string) bool { return ns == d || strings.HasSuffix(ns, "."+d) }
	if !inK8s("kubernetes.io") && !inK8s("k8s.io") {
		return false
	}
	if kubeletLabels[key] {
		return false
	}
	for _, allowed := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return false
		}
	}
	return true
}

// ParseTaints reads the kubelet's --register-with-taints syntax:
// key[=value]:Effect, comma separated.
func ParseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, spec := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(strings.TrimSpace(spec), ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint spec %q: want key[=value]:effect", spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
		if err := validateTaint(t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func validateTaint(t corev1.Taint) error {
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Errorf("invalid taint key %q: %s", t.Key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return fmt.Errorf("invalid taint value %q: %s", t.Value, strings.Join(errs, "; "))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return fmt.Errorf("invalid taint effect %q for %q: NoSchedule, PreferNoSchedule or NoExecute", t.Effect, t.Key)
}
