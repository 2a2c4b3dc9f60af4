package fakeaws_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// al2023UserData is what an autoscaler writes for AL2023, by hand: nodeadm's
// NodeConfig in a MIME document, next to a user's shell script.
func al2023UserData(endpoint string, ca []byte) string {
	return `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "user script"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: ` + clusterName + `
    apiServerEndpoint: ` + endpoint + `
    certificateAuthority: ` + base64.StdEncoding.EncodeToString(ca) + `
    cidr: 10.96.0.0/16
  kubelet:
    config:
      maxPods: 29
      clusterDNS: [10.96.0.10]
      kubeReserved: {cpu: 70m, memory: 574Mi, ephemeral-storage: 1Gi}
      evictionHard: {memory.available: 100Mi}
    flags:
    - --node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=default
    - --register-with-taints=example.com/dedicated=batch:NoSchedule

--BOUNDARY--
`
}

func al2UserData(endpoint string, ca []byte) string {
	return fmt.Sprintf(`#!/bin/bash -xe
/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s' --b64-cluster-ca '%s' \
  --dns-cluster-ip '10.96.0.10' \
  --kubelet-extra-args '--node-labels="karpenter.sh/nodepool=arm" --register-with-taints="arch=arm64:NoSchedule"'
`, clusterName, endpoint, base64.StdEncoding.EncodeToString(ca))
}

func bottlerocketUserData(endpoint string, ca []byte) string {
	return fmt.Sprintf(`[settings.kubernetes]
api-server = '%s'
cluster-certificate = '%s'
cluster-name = '%s'
max-pods = 110

[settings.kubernetes.node-labels]
'karpenter.sh/nodepool' = 'br'
`, endpoint, base64.StdEncoding.EncodeToString(ca), clusterName)
}

func disk(device string, gib int32) ec2types.LaunchTemplateBlockDeviceMappingRequest {
	return ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: aws.String(device), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(gib), VolumeType: "gp3"}}
}

func TestInstancesBootIntoNodes(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	kube := must(kubernetes.NewForConfig(cluster.Config))(t)
	endpoint, ca := cluster.Config.Host, cluster.Config.CAData
	otherCA := []byte(strings.Replace(string(ca), "A", "B", 1))

	tests := []struct {
		name     string
		image    string
		typ      string
		zone     string
		userData string
		disks    []ec2types.LaunchTemplateBlockDeviceMappingRequest
		// fleet launches through a launch template and CreateFleet, as the
		// provider does; otherwise RunInstances with the same template.
		fleet bool

		wantReason      string
		wantLabels      map[string]string
		wantTaints      []corev1.Taint
		wantCapacity    map[corev1.ResourceName]string
		wantAllocatable map[corev1.ResourceName]string
	}{
		{
			name: "al2023 through CreateFleet", fleet: true,
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			typ:   "m5.large", zone: "us-east-1a", userData: al2023UserData(endpoint, ca),
			disks: []ec2types.LaunchTemplateBlockDeviceMappingRequest{disk("/dev/xvda", 20)},
			wantLabels: map[string]string{
				"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
				corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelTopologyRegion: region,
				corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
			},
			wantTaints:      []corev1.Taint{{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
			wantCapacity:    map[corev1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "29", "ephemeral-storage": "20Gi"},
			wantAllocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7518Mi", "pods": "29", "ephemeral-storage": "17Gi"},
		},
		{
			name:  "al2 bootstrap.sh on arm64, ENI-limited max pods",
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-arm64/recommended/image_id",
			typ:   "t4g.medium", zone: "us-east-1b", userData: al2UserData(endpoint, ca),
			disks:        []ec2types.LaunchTemplateBlockDeviceMappingRequest{disk("/dev/xvda", 30)},
			wantLabels:   map[string]string{"karpenter.sh/nodepool": "arm", corev1.LabelArchStable: "arm64", corev1.LabelTopologyZone: "us-east-1b"},
			wantTaints:   []corev1.Taint{{Key: "arch", Value: "arm64", Effect: corev1.TaintEffectNoSchedule}},
			wantCapacity: map[corev1.ResourceName]string{"cpu": "2", "memory": "4Gi", "pods": "17", "ephemeral-storage": "30Gi"},
			// 4096Mi - (11*17+255)Mi - 100Mi; 30Gi - 1Gi - 10%.
			wantAllocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "3554Mi", "pods": "17", "ephemeral-storage": "26Gi"},
		},
		{
			name: "bottlerocket keeps pods on its data volume", fleet: true,
			image: "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id",
			typ:   "c6a.large", zone: "us-east-1c", userData: bottlerocketUserData(endpoint, ca),
			disks:        []ec2types.LaunchTemplateBlockDeviceMappingRequest{disk("/dev/xvda", 4), disk("/dev/xvdb", 50)},
			wantLabels:   map[string]string{"karpenter.sh/nodepool": "br", corev1.LabelInstanceTypeStable: "c6a.large"},
			wantCapacity: map[corev1.ResourceName]string{"pods": "110", "ephemeral-storage": "50Gi"},
		},
		{
			name: "the wrong cluster CA never joins", fleet: true,
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			typ:   "m5.large", zone: "us-east-1a", userData: al2023UserData(endpoint, otherCA),
			wantReason: "certificate signed by unknown authority",
		},
		{
			name: "the wrong API server never joins", fleet: true,
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			typ:   "m5.large", zone: "us-east-1a", userData: al2023UserData("https://10.0.0.1:443", ca),
			wantReason: "is not the cluster's",
		},
		{
			name:  "AL2 user data on an AL2023 image never joins",
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			typ:   "m5.large", zone: "us-east-1a", userData: al2UserData(endpoint, ca),
			wantReason: "neither a MIME multipart document nor a NodeConfig",
		},
		{
			name:  "an x86_64 image on a type that also runs i386",
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			typ:   "m1.small", zone: "us-east-1a", userData: al2023UserData(endpoint, ca),
			wantLabels: map[string]string{corev1.LabelInstanceTypeStable: "m1.small", corev1.LabelArchStable: "amd64"},
		},
		{
			name:  "an arm64 image on an x86 type never boots",
			image: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id",
			typ:   "m5.large", zone: "us-east-1a", userData: al2023UserData(endpoint, ca),
			wantReason: "is arm64 but m5.large is x86_64",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lt := must(c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
				LaunchTemplateName: aws.String(fmt.Sprintf("boot-%d", i)),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
					ImageId:             aws.String(imageID(t, tt.image)),
					UserData:            aws.String(base64.StdEncoding.EncodeToString([]byte(tt.userData))),
					BlockDeviceMappings: tt.disks,
					SecurityGroupIds:    []string{fake.Seed().SecurityGroupID},
				},
			}))(t)
			var id string
			if tt.fleet {
				out := must(c.EC2.CreateFleet(ctx, &ec2.CreateFleetInput{
					Type:                        ec2types.FleetTypeInstant,
					TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: "on-demand"},
					LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
						LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
						Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(tt.typ), SubnetId: aws.String(subnetIn(tt.zone)), AvailabilityZone: aws.String(tt.zone)}},
					}},
				}))(t)
				if len(out.Instances) != 1 {
					t.Fatalf("CreateFleet launched %s, errors %s", describe(out.Instances), describe(out.Errors))
				}
				id = out.Instances[0].InstanceIds[0]
			} else {
				var mappings []ec2types.BlockDeviceMapping
				for _, d := range tt.disks {
					mappings = append(mappings, ec2types.BlockDeviceMapping{DeviceName: d.DeviceName, Ebs: &ec2types.EbsBlockDevice{VolumeSize: d.Ebs.VolumeSize, VolumeType: d.Ebs.VolumeType}})
				}
				out := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
					LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId},
					InstanceType:   ec2types.InstanceType(tt.typ), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
					SubnetId: aws.String(subnetIn(tt.zone)), BlockDeviceMappings: mappings,
				}))(t)
				id = aws.ToString(out.Instances[0].InstanceId)
			}
			boot := waitBoot(t, id)
			if tt.wantReason != "" {
				terminate(t, id)
				if boot.Joined || !strings.Contains(boot.Reason, tt.wantReason) {
					t.Fatalf("boot %s, want no join because %q", describe(boot), tt.wantReason)
				}
				var viaAdmin []fakeaws.Boot
				admin(t, "GET", "/_fake/boots", nil, &viaAdmin)
				if !strings.Contains(describe(viaAdmin), id) {
					t.Errorf("the admin API does not list the failed boot of %s", id)
				}
				return
			}
			if !boot.Joined {
				terminate(t, id)
				t.Fatalf("instance did not join: %s", boot.Reason)
			}
			inst := must(c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}))(t).Reservations[0].Instances[0]
			node := waitNode(t, kube, boot.Node, func(n *corev1.Node) bool { return ready(n) })
			if node.Name != aws.ToString(inst.PrivateDnsName) || node.Spec.ProviderID != "aws:///"+tt.zone+"/"+id {
				t.Errorf("node %s providerID %s, want %s and aws:///%s/%s", node.Name, node.Spec.ProviderID, aws.ToString(inst.PrivateDnsName), tt.zone, id)
			}
			for k, v := range tt.wantLabels {
				if node.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			for _, want := range tt.wantTaints {
				found := false
				for _, got := range node.Spec.Taints {
					found = found || (got.Key == want.Key && got.Value == want.Value && got.Effect == want.Effect)
				}
				if !found {
					t.Errorf("taints %v, want %v among them", node.Spec.Taints, want)
				}
			}
			checkResources(t, "capacity", node.Status.Capacity, tt.wantCapacity)
			checkResources(t, "allocatable", node.Status.Allocatable, tt.wantAllocatable)

			terminate(t, id)
			waitNode(t, kube, boot.Node, nil)
		})
	}
}

func checkResources(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	for r, w := range want {
		if q := got[r]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s %s = %s, want %s", what, r, q.String(), w)
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitBoot waits for the endpoint to have played the instance's boot.
func waitBoot(t *testing.T, id string) fakeaws.Boot {
	t.Helper()
	var boot fakeaws.Boot
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, b := range fake.Boots() {
			if b.InstanceID == id {
				boot = b
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("instance %s never booted: %v", id, err)
	}
	return boot
}

// waitNode waits until the Node satisfies ok, or, with ok nil, is gone.
func waitNode(t *testing.T, kube kubernetes.Interface, name string, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ok == nil, nil
		}
		if err != nil {
			return false, nil
		}
		node = n
		return ok != nil && ok(n), nil
	})
	if err != nil {
		if ok == nil {
			t.Fatalf("Node %s is still there after its instance ended: %v", name, err)
		}
		t.Fatalf("Node %s never became what the test waits for: %v (last seen %s)", name, err, describe(node))
	}
	return node
}

// TestStaleNodeIsReplaced: EC2 reuses private IPs, and Nodes are named after
// them, so a Node left by an instance that is gone may hold the name a new
// instance registers under. It is replaced, as the cloud controller manager
// would have deleted it.
func TestStaleNodeIsReplaced(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	kube := must(kubernetes.NewForConfig(cluster.Config))(t)
	subnet := must(c.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetIn("us-east-1a")}}))(t).Subnets[0]
	ip := strings.TrimSuffix(aws.ToString(subnet.CidrBlock), ".0/19") + ".200"
	name := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
	stale := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000stale"}}
	must(kube.CoreV1().Nodes().Create(ctx, stale, metav1.CreateOptions{}))(t)

	run := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:      aws.String(imageID(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")),
		InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: subnet.SubnetId, PrivateIpAddress: aws.String(ip),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(al2023UserData(cluster.Config.Host, cluster.Config.CAData)))),
	}))(t)
	id := aws.ToString(run.Instances[0].InstanceId)
	if got := aws.ToString(run.Instances[0].PrivateDnsName); got != name {
		terminate(t, id)
		t.Fatalf("moto named the instance %s, want %s: the test cannot set up the collision", got, name)
	}
	boot := waitBoot(t, id)
	if !boot.Joined {
		terminate(t, id)
		t.Fatalf("instance did not join: %s", boot.Reason)
	}
	node := waitNode(t, kube, name, func(n *corev1.Node) bool { return n.Spec.ProviderID == "aws:///us-east-1a/"+id })
	if node.Labels[corev1.LabelInstanceTypeStable] != "m5.large" {
		t.Errorf("the Node is not the new instance's: %v", node.Labels)
	}
	terminate(t, id)
	waitNode(t, kube, name, nil)
}
