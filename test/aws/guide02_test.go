package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// TestGuide02SpotTainted is the spot guide's manifest, applied verbatim: a
// class pinned to al2023@v20250821 with a 100Gi root volume, IMDS options and
// a Name tag, and a spot-only t3a.large pool whose nodes carry the taint
// spot=only:NoSchedule, which the guide's workload tolerates.
func TestGuide02SpotTainted(t *testing.T) {
	ctx := context.Background()
	fake.ResetCalls()
	explainBoots(t, fake)
	guide02Cluster(t)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	framework.Kubectl(t, framework.ReadSeed(t, "02-spot-tainted-nodepool.yaml"), "apply", "-f", "-")
	sel := map[string]string{"app": "spot-workload"}
	framework.Eventually(t, 3*time.Minute, "three spot-workload pods run", func() (bool, string) {
		n, nodes := framework.Running(t, sel)
		return n == 3, fmt.Sprintf("%d running on %v", n, nodes)
	})

	ec2c := ec2Client(t)
	claims := framework.Registered(t)
	if len(claims) == 0 {
		t.Fatal("pods run but there is no NodeClaim")
	}
	_, onNodes := framework.Running(t, sel)
	for _, nc := range claims {
		node := &corev1.Node{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
			t.Fatalf("NodeClaim %s's node: %v", nc.Name, err)
		}
		// The Node's labels and taints are what the kubelet registered
		// from the user data.
		if node.Labels[corev1.LabelInstanceTypeStable] != "t3a.large" || node.Labels[v1.LabelCapacityType] != "spot" || node.Labels["node-group-type"] != "spot" {
			t.Errorf("node %s labels %v", node.Name, node.Labels)
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || (taint.Key == "spot" && taint.Value == "only" && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		if !tainted {
			t.Errorf("node %s lacks spot=only:NoSchedule: %v", node.Name, node.Spec.Taints)
		}
		// The class's 100Gi root volume is the node's disk.
		if got := node.Status.Capacity[corev1.ResourceEphemeralStorage]; got.Cmp(resource.MustParse("100Gi")) != 0 {
			t.Errorf("node %s ephemeral storage %s, want the class's 100Gi root volume", node.Name, got.String())
		}
		delete(onNodes, node.Name)

		id := instanceID(nc.Status.ProviderID)
		out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
			t.Fatalf("describing %s: %v", id, err)
		}
		inst := out.Reservations[0].Instances[0]
		tags := map[string]string{}
		for _, tag := range inst.Tags {
			tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		// The class's Name tag wins over the node name Joiner would give.
		if inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || tags["Name"] != "demo-spot-node" || tags["karpenter.sh/nodeclaim"] != nc.Name {
			t.Errorf("instance %s: lifecycle %q tags %v", id, inst.InstanceLifecycle, tags)
		}
	}
	if len(onNodes) > 0 {
		t.Errorf("spot-workload pods run on nodes no NodeClaim owns: %v", onNodes)
	}

	// The launch template carries the class's disk and IMDS settings.
	lts, err := ec2c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:karpenter.k8s.aws/ec2nodeclass"), Values: []string{"spot-class"}}}})
	if err != nil || len(lts.LaunchTemplates) == 0 {
		t.Fatalf("the class's launch templates: %v (%d)", err, len(lts.LaunchTemplates))
	}
	for _, lt := range lts.LaunchTemplates {
		vs, err := ec2c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{"$Latest"}})
		if err != nil || len(vs.LaunchTemplateVersions) != 1 {
			t.Fatalf("launch template %s: %v", aws.ToString(lt.LaunchTemplateName), err)
		}
		data := vs.LaunchTemplateVersions[0].LaunchTemplateData
		md := data.MetadataOptions
		if md == nil || md.HttpTokens != ec2types.LaunchTemplateHttpTokensStateOptional || aws.ToInt32(md.HttpPutResponseHopLimit) != 2 ||
			md.HttpEndpoint != ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled {
			t.Errorf("launch template %s metadata options %+v", aws.ToString(lt.LaunchTemplateName), md)
		}
		if len(data.BlockDeviceMappings) != 1 || aws.ToString(data.BlockDeviceMappings[0].DeviceName) != "/dev/xvda" ||
			data.BlockDeviceMappings[0].Ebs == nil || aws.ToInt32(data.BlockDeviceMappings[0].Ebs.VolumeSize) != 100 {
			t.Errorf("launch template %s block devices %s", aws.ToString(lt.LaunchTemplateName), describeBlockDevices(data.BlockDeviceMappings))
		}
	}
	for _, f := range fake.Calls("ec2", "CreateFleet") {
		if f.Params["DefaultTargetCapacityType"] != "spot" {
			t.Errorf("a %v fleet for a spot-only pool", f.Params["DefaultTargetCapacityType"])
		}
	}
}

// guide02Cluster gives the endpoint what the spot guide's cluster has
// before its manifest is applied: the node role it names, and subnets and a
// security group tagged for the cluster "demo-eks-cluster".
func guide02Cluster(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	cfg := clientConfig(t, fake.URL(), region)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	_, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("demo-eks-node-group-role"), AssumeRolePolicyDocument: aws.String(trust)})
	var exists *iamtypes.EntityAlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		t.Fatal(err)
	}
	seed := fake.Seed()
	for _, tag := range []struct {
		ids        []string
		key, value string
	}{
		{seed.SubnetIDs, "kubernetes.io/cluster/demo-eks-cluster", "shared"},
		{[]string{seed.SecurityGroupID}, "kubernetes.io/cluster/demo-eks-cluster", "owned"},
	} {
		if _, err := ec2Client(t).CreateTags(ctx, &ec2.CreateTagsInput{Resources: tag.ids, Tags: []ec2types.Tag{{Key: aws.String(tag.key), Value: aws.String(tag.value)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func describeBlockDevices(ms []ec2types.LaunchTemplateBlockDeviceMapping) string {
	var out []string
	for _, m := range ms {
		size := int32(0)
		if m.Ebs != nil {
			size = aws.ToInt32(m.Ebs.VolumeSize)
		}
		out = append(out, fmt.Sprintf("%s:%dGiB", aws.ToString(m.DeviceName), size))
	}
	return "[" + strings.Join(out, " ") + "]"
}
