package fakeaws

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws/kubelet"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws/userdata"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Boot is how an instance's boot went: whether its kubelet joined the
// cluster, and if not, why, as the node would have logged it.
type Boot struct {
	InstanceID   string `json:"instanceId"`
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	ImageID      string `json:"imageId,omitempty"`
	Family       string `json:"family,omitempty"`
	// State is the instance state last seen.
	State string `json:"state"`
	// Node is the Node registered for the instance.
	Node   string `json:"node,omitempty"`
	Joined bool   `json:"joined"`
	// Reason says why the node did not join.
	Reason string `json:"reason,omitempty"`
	// Deleted is set once the Node was removed after the instance ended.
	Deleted bool `json:"deleted,omitempty"`
	// KubeletDead is set once the Node's kubelet stopped: its instance
	// stopped or ended, or KillKubelet killed it.
	KubeletDead bool `json:"kubeletDead,omitempty"`
}

// nodeBooter watches moto's instances and plays each one's boot: read the
// user data as its image would, register the Node the kubelet would, and
// remove it when the instance ends, as the cloud controller manager does.
type nodeBooter struct {
	s  *Server
	mu sync.Mutex
	// boots by instance ID.
	boots map[string]*Boot
	types map[string]*ec2types.InstanceTypeInfo
	// templateDisks caches launch template versions' block device mappings.
	templateDisks map[string][]ec2types.LaunchTemplateBlockDeviceMapping
}

func newNodeBooter(s *Server) *nodeBooter {
	return &nodeBooter{s: s, boots: map[string]*Boot{}, types: map[string]*ec2types.InstanceTypeInfo{},
		templateDisks: map[string][]ec2types.LaunchTemplateBlockDeviceMapping{}}
}

func (b *nodeBooter) run(ctx context.Context) {
	t := b.s.clock.NewTicker(b.s.opts.PollInterval)
	defer t.Stop()
	for {
		if err := b.poll(ctx); err != nil && ctx.Err() == nil {
			b.s.log.Error(err, "watching instances")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Boots reports every instance the endpoint has seen boot, by instance ID.
func (s *Server) Boots() []Boot {
	if s.nodes == nil {
		return nil
	}
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	out := make([]Boot, 0, len(s.nodes.boots))
	for _, id := range sortedMapKeys(s.nodes.boots) {
		out = append(out, *s.nodes.boots[id])
	}
	return out
}

// poll is one pass: a paginated DescribeInstances straight to moto (no
// faults, no call log), then a boot for each new running instance and a
// Node deletion for each instance that ended. Terminated instances are
// left out of the listing (moto keeps them forever, which would make every
// pass slower): an instance missing from it has ended.
func (b *nodeBooter) poll(ctx context.Context) error {
	var instances []ec2types.Instance
	p := ec2.NewDescribeInstancesPaginator(b.s.motoEC2, &ec2.DescribeInstancesInput{
		MaxResults: aws.Int32(1000),
		Filters:    []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "shutting-down", "stopping", "stopped"}}},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("DescribeInstances on moto: %w", err)
		}
		for _, r := range out.Reservations {
			instances = append(instances, r.Instances...)
		}
	}
	seen := map[string]bool{}
	for _, inst := range instances {
		id := aws.ToString(inst.InstanceId)
		seen[id] = true
		state := string(inst.State.Name)
		b.mu.Lock()
		boot := b.boots[id]
		b.mu.Unlock()
		switch {
		case boot == nil && inst.State.Name == ec2types.InstanceStateNameRunning:
			boot = b.boot(ctx, inst)
			if ctx.Err() != nil {
				return nil
			}
			b.mu.Lock()
			b.boots[id] = boot
			b.mu.Unlock()
		case boot != nil && (inst.State.Name == ec2types.InstanceStateNameShuttingDown || inst.State.Name == ec2types.InstanceStateNameTerminated):
			b.remove(ctx, boot)
		case boot != nil && (inst.State.Name == ec2types.InstanceStateNameStopping || inst.State.Name == ec2types.InstanceStateNameStopped):
			// A stopped instance keeps its Node (the cloud controller
			// manager only taints it) but runs no kubelet.
			if err := b.killKubelet(ctx, boot); err != nil {
				b.s.log.Error(err, "stopping the kubelet of a stopped instance", "instance", boot.InstanceID)
			}
		}
		if boot != nil {
			b.mu.Lock()
			boot.State = state
			b.mu.Unlock()
		}
	}
	b.mu.Lock()
	var gone []*Boot
	for id, boot := range b.boots {
		if !seen[id] {
			boot.State = string(ec2types.InstanceStateNameTerminated)
			if boot.Joined && !boot.Deleted {
				gone = append(gone, boot)
			}
		}
	}
	b.mu.Unlock()
	for _, boot := range gone {
		b.remove(ctx, boot)
	}
	return nil
}

func (b *nodeBooter) remove(ctx context.Context, boot *Boot) {
	b.mu.Lock()
	joined := boot.Joined && !boot.Deleted
	b.mu.Unlock()
	if !joined {
		return
	}
	// The machine is gone, and its kubelet with it: nothing confirms the
	// deletion of the pods still bound to the Node.
	if err := b.killKubelet(ctx, boot); err != nil {
		b.s.log.Error(err, "stopping the kubelet of an ended instance", "instance", boot.InstanceID, "node", boot.Node)
		return
	}
	err := b.s.cluster.kube.CoreV1().Nodes().Delete(ctx, boot.Node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.s.log.Error(err, "deleting the Node of an ended instance", "instance", boot.InstanceID, "node", boot.Node)
		return
	}
	b.mu.Lock()
	boot.Deleted = true
	b.mu.Unlock()
	b.s.log.Info("instance ended, Node deleted", "instance", boot.InstanceID, "node", boot.Node)
}

// boot plays one instance's boot and returns how it went.
func (b *nodeBooter) boot(ctx context.Context, inst ec2types.Instance) *Boot {
	boot := &Boot{
		InstanceID: aws.ToString(inst.InstanceId), InstanceType: string(inst.InstanceType),
		ImageID: aws.ToString(inst.ImageId), State: string(inst.State.Name),
	}
	if inst.Placement != nil {
		boot.Zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	node, family, err := b.register(ctx, inst, boot)
	boot.Family = string(family)
	if err != nil {
		boot.Reason = err.Error()
		b.s.log.Info("instance did not join the cluster", "instance", boot.InstanceID, "reason", boot.Reason)
		return boot
	}
	boot.Node, boot.Joined = node, true
	b.s.log.Info("instance joined the cluster", "instance", boot.InstanceID, "node", node, "type", boot.InstanceType, "zone", boot.Zone)
	return boot
}

func (b *nodeBooter) register(ctx context.Context, inst ec2types.Instance, boot *Boot) (string, userdata.Family, error) {
	s := b.s
	img, family, err := b.image(ctx, boot.ImageID)
	if err != nil {
		return "", "", err
	}
	attr, err := s.motoEC2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
		InstanceId: inst.InstanceId, Attribute: ec2types.InstanceAttributeNameUserData,
	})
	if err != nil {
		return "", family, fmt.Errorf("reading the user data: %w", err)
	}
	var raw []byte
	if attr.UserData != nil && aws.ToString(attr.UserData.Value) != "" {
		if raw, err = base64.StdEncoding.DecodeString(aws.ToString(attr.UserData.Value)); err != nil {
			return "", family, fmt.Errorf("user data is not base64: %w", err)
		}
	}
	if len(raw) == 0 {
		return "", family, fmt.Errorf("the instance has no user data, so the image's bootstrap has no cluster to join")
	}
	if family == "" {
		if family = userdata.Sniff(raw); family == "" {
			return "", "", fmt.Errorf("image %s is not an EKS node image the endpoint knows, and its user data matches no node bootstrap (nodeadm, bootstrap.sh, Bottlerocket, Start-EKSBootstrap)", boot.ImageID)
		}
	}
	cfg, err := userdata.Decode(family, raw)
	if err != nil {
		return "", family, err
	}
	if err := b.checkCluster(cfg); err != nil {
		return "", family, err
	}
	info, err := b.instanceType(ctx, string(inst.InstanceType))
	if err != nil {
		return "", family, err
	}
	arch := "amd64"
	if info.ProcessorInfo != nil && len(info.ProcessorInfo.SupportedArchitectures) > 0 {
		// Some types run more than one (m1.small: i386 and x86_64); the
		// image's is the one the instance runs.
		var supported []string
		for _, a := range info.ProcessorInfo.SupportedArchitectures {
			supported = append(supported, string(a))
		}
		runs := supported[0]
		if img.Arch != "" {
			if !slices.Contains(supported, img.Arch) {
				return "", family, fmt.Errorf("image %s is %s but %s is %s: EC2 refuses such a launch, and this instance could never boot", boot.ImageID, img.Arch, boot.InstanceType, strings.Join(supported, " or "))
			}
			runs = img.Arch
		}
		if runs == "arm64" {
			arch = "arm64"
		}
	}
	name := aws.ToString(inst.PrivateDnsName)
	if name == "" {
		return "", family, fmt.Errorf("the instance has no private DNS name to name its Node after")
	}
	m := kubelet.Machine{
		Name: name, InstanceID: boot.InstanceID, InstanceType: boot.InstanceType,
		ProviderID: fmt.Sprintf("aws:///%s/%s", boot.Zone, boot.InstanceID),
		Region:     s.region, Zone: boot.Zone, PrivateIP: aws.ToString(inst.PrivateIpAddress), Arch: arch,
		WindowsBuild: img.WindowsBuild, MemoryOverheadPercent: s.opts.MemoryOverheadPercent,
		KubeletVersion: s.cluster.gitVersion,
	}
	if zs, err := s.zoneInfos(ctx, s.region); err == nil {
		for _, z := range zs {
			if z.name == boot.Zone {
				m.ZoneID = z.id
			}
		}
	}
	if info.VCpuInfo != nil {
		m.VCPUs = int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		m.MemoryMiB = aws.ToInt64(info.MemoryInfo.SizeInMiB)
	}
	if n := info.NetworkInfo; n != nil && n.MaximumNetworkInterfaces != nil && n.Ipv4AddressesPerInterface != nil {
		m.ENIMaxPods = *n.MaximumNetworkInterfaces*(*n.Ipv4AddressesPerInterface-1) + 2
	}
	m.Extended = b.extendedResources(boot.InstanceType, info)
	rootGiB, err := b.storage(ctx, inst, img, family)
	if err != nil {
		return "", family, err
	}
	m.EphemeralStorage = *resource.NewQuantity(rootGiB<<30, resource.BinarySI)
	if q, ok := instanceStore(info, cfg.LocalStorage); ok {
		m.EphemeralStorage = q
	}
	node, err := kubelet.Node(m, cfg)
	if err != nil {
		return "", family, err
	}
	nodes := s.cluster.kube.CoreV1().Nodes()
	_, err = nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A Node of that name from an instance that is gone (the name is the
		// private IP, which EC2 reuses): the cloud controller manager would
		// have deleted it, so replace it.
		old, gerr := nodes.Get(ctx, name, metav1.GetOptions{})
		if gerr == nil && old.Spec.ProviderID == node.Spec.ProviderID {
			return name, family, nil
		}
		if derr := nodes.Delete(ctx, name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			return "", family, fmt.Errorf("registering Node %s: a stale Node of that name is in the way: %w", name, derr)
		}
		_, err = nodes.Create(ctx, node, metav1.CreateOptions{})
	}
	if err != nil {
		return "", family, fmt.Errorf("registering Node %s: %w", name, err)
	}
	return name, family, nil
}

// image finds the instance's image and its family: the endpoint's own
// images are known; for others the family is read from the name when it
// follows the EKS images' naming, and left empty otherwise.
func (b *nodeBooter) image(ctx context.Context, id string) (image, userdata.Family, error) {
	if img, ok := b.s.images.image(id); ok {
		return *img, img.Family, nil
	}
	out, err := b.s.motoEC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) == 0 {
		return image{}, "", fmt.Errorf("image %s does not exist, so the instance cannot boot: %v", id, err)
	}
	mi := out.Images[0]
	img := image{ID: id, Name: aws.ToString(mi.Name), Arch: string(mi.Architecture), RootDevice: aws.ToString(mi.RootDeviceName)}
	name := strings.ToLower(img.Name)
	var family userdata.Family
	switch {
	case strings.HasPrefix(name, "amazon-eks-node-al2023-"):
		family = userdata.AL2023
	case strings.HasPrefix(name, "amazon-eks-"):
		family = userdata.AL2
	case strings.HasPrefix(name, "bottlerocket-"):
		family = userdata.Bottlerocket
	case strings.Contains(name, "eks_optimized") && strings.HasPrefix(name, "windows_server"):
		family = userdata.Windows
	}
	return img, family, nil
}

// checkCluster fails the way a kubelet pointed at the wrong cluster does.
func (b *nodeBooter) checkCluster(cfg *userdata.Config) error {
	cl := b.s.cluster
	if cfg.ClusterName != b.s.opts.ClusterName {
		return fmt.Errorf("user data names cluster %q, not %q: the kubelet's credentials (aws-iam-authenticator for that cluster name) are refused, so the node never registers", cfg.ClusterName, b.s.opts.ClusterName)
	}
	if cfg.DescribesCluster {
		return nil // the bootstrap asks EKS, which answers with the real cluster
	}
	if strings.TrimSuffix(cfg.APIServerEndpoint, "/") != strings.TrimSuffix(cl.endpoint, "/") {
		return fmt.Errorf("user data's API server %q is not the cluster's (%s): the kubelet cannot register", cfg.APIServerEndpoint, cl.endpoint)
	}
	if !bytes.Equal(bytes.TrimSpace(cfg.CertificateAuthority), bytes.TrimSpace(cl.ca)) {
		return fmt.Errorf("user data's cluster CA is not the cluster's: the kubelet fails with x509: certificate signed by unknown authority")
	}
	return nil
}

func (b *nodeBooter) instanceType(ctx context.Context, name string) (*ec2types.InstanceTypeInfo, error) {
	b.mu.Lock()
	info, ok := b.types[name]
	b.mu.Unlock()
	if ok {
		return info, nil
	}
	out, err := b.s.motoEC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(name)}})
	if err == nil && len(out.InstanceTypes) > 0 {
		info = &out.InstanceTypes[0]
	} else if info, err = b.catalogType(name); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.types[name] = info
	b.mu.Unlock()
	return info, nil
}

// catalogType describes a type moto does not know from the embedded catalog.
func (b *nodeBooter) catalogType(name string) (*ec2types.InstanceTypeInfo, error) {
	its, err := b.s.catalog.get(b.s.region)
	if err != nil {
		return nil, err
	}
	for _, it := range its {
		if it.Name != name {
			continue
		}
		cpu := it.Capacity[corev1.ResourceCPU]
		mem := it.Capacity[corev1.ResourceMemory]
		arch := ec2types.ArchitectureTypeX8664
		if it.Labels[corev1.LabelArchStable] == "arm64" {
			arch = ec2types.ArchitectureTypeArm64
		}
		return &ec2types.InstanceTypeInfo{
			InstanceType:  ec2types.InstanceType(name),
			VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(int32(cpu.Value()))},
			MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mem.Value() / (1 << 20))},
			ProcessorInfo: &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		}, nil
	}
	return nil, fmt.Errorf("instance type %s is unknown to moto and to the catalog", name)
}

// extendedResources are what device plugins would advertise (GPUs, Neuron
// devices), from the catalog, or moto's GPU count for types it lacks.
func (b *nodeBooter) extendedResources(name string, info *ec2types.InstanceTypeInfo) corev1.ResourceList {
	out := corev1.ResourceList{}
	if its, err := b.s.catalog.get(b.s.region); err == nil {
		for _, it := range its {
			if it.Name != name {
				continue
			}
			for r, q := range it.Allocatable {
				switch r {
				case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, "vpc.amazonaws.com/pod-eni":
				default:
					out[r] = q
				}
			}
			return out
		}
	}
	if info.GpuInfo != nil {
		n := int64(0)
		for _, g := range info.GpuInfo.Gpus {
			if strings.EqualFold(aws.ToString(g.Manufacturer), "nvidia") {
				n += int64(aws.ToInt32(g.Count))
			}
		}
		if n > 0 {
			out["nvidia.com/gpu"] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// storage is the size of the volume the kubelet's pods write to: the root
// volume, or Bottlerocket's data volume (/dev/xvdb). An instance CreateFleet
// launched gets its volumes from the launch template (moto ignores a fleet
// template's block device mappings); others from their attached volumes.
func (b *nodeBooter) storage(ctx context.Context, inst ec2types.Instance, img image, family userdata.Family) (int64, error) {
	device := img.RootDevice
	if family == userdata.Bottlerocket {
		device = "/dev/xvdb"
	}
	if l, ok := b.s.launchOf(aws.ToString(inst.InstanceId)); ok && l.template != "" {
		disks, err := b.templateDisksOf(ctx, l.template, l.version)
		if err != nil {
			return 0, err
		}
		if size := templateVolume(disks, device); size > 0 {
			return size, nil
		}
	}
	var ids []string
	byID := map[string]string{}
	for _, m := range inst.BlockDeviceMappings {
		if m.Ebs != nil && m.Ebs.VolumeId != nil {
			ids = append(ids, *m.Ebs.VolumeId)
			byID[*m.Ebs.VolumeId] = aws.ToString(m.DeviceName)
		}
	}
	if len(ids) > 0 {
		out, err := b.s.motoEC2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: ids})
		if err != nil {
			return 0, fmt.Errorf("DescribeVolumes on moto: %w", err)
		}
		sort.Slice(out.Volumes, func(i, j int) bool { return byID[*out.Volumes[i].VolumeId] < byID[*out.Volumes[j].VolumeId] })
		for _, v := range out.Volumes {
			if byID[*v.VolumeId] == device {
				return int64(aws.ToInt32(v.Size)), nil
			}
		}
		if len(out.Volumes) > 0 {
			return int64(aws.ToInt32(out.Volumes[0].Size)), nil
		}
	}
	return 20, nil
}

// instanceStore is the kubelet's volume when the user data builds an array
// of the instance store disks: EC2 sizes them in decimal gigabytes. A type
// without disks leaves the setup nothing to do, and the kubelet on the root
// volume, as on a real node.
func instanceStore(info *ec2types.InstanceTypeInfo, strategy userdata.LocalStorage) (resource.Quantity, bool) {
	if info.InstanceStorageInfo == nil || aws.ToInt64(info.InstanceStorageInfo.TotalSizeInGB) == 0 {
		return resource.Quantity{}, false
	}
	gb := aws.ToInt64(info.InstanceStorageInfo.TotalSizeInGB)
	switch strategy {
	case userdata.LocalStorageRAID0:
	case userdata.LocalStorageRAID10:
		gb /= 2
	default:
		return resource.Quantity{}, false
	}
	return *resource.NewQuantity(gb*1000*1000*1000, resource.DecimalSI), true
}

func templateVolume(disks []ec2types.LaunchTemplateBlockDeviceMapping, device string) int64 {
	for _, d := range disks {
		if aws.ToString(d.DeviceName) == device && d.Ebs != nil && d.Ebs.VolumeSize != nil {
			return int64(*d.Ebs.VolumeSize)
		}
	}
	for _, d := range disks {
		if d.Ebs != nil && d.Ebs.VolumeSize != nil {
			return int64(*d.Ebs.VolumeSize)
		}
	}
	return 0
}

func (b *nodeBooter) templateDisksOf(ctx context.Context, template, version string) ([]ec2types.LaunchTemplateBlockDeviceMapping, error) {
	key := template + "/" + version
	b.mu.Lock()
	disks, ok := b.templateDisks[key]
	b.mu.Unlock()
	if ok {
		return disks, nil
	}
	out, err := b.s.motoEC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: aws.String(template), Versions: []string{version},
	})
	if err != nil {
		return nil, fmt.Errorf("reading launch template %s version %s: %w", template, version, err)
	}
	if len(out.LaunchTemplateVersions) > 0 && out.LaunchTemplateVersions[0].LaunchTemplateData != nil {
		disks = out.LaunchTemplateVersions[0].LaunchTemplateData.BlockDeviceMappings
	}
	b.mu.Lock()
	b.templateDisks[key] = disks
	b.mu.Unlock()
	return disks, nil
}
