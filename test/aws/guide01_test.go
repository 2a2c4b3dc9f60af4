package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// TestGuide01SpotArmInSeoul is the first guide's pool: t4g (arm64) spot or
// on-demand in ap-northeast-2a. The region is given as --region while
// AWS_REGION says us-east-1, so the flag must win: the endpoint of this test
// only has the Seoul cluster's network.
func TestGuide01SpotArmInSeoul(t *testing.T) {
	const seoul = "ap-northeast-2"
	ctx := context.Background()
	fake.ResetCalls()
	other, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: clusterName, Region: seoul, Kubeconfig: framework.Cluster.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop) // after the Joiner, which stops after the reset below
	explainBootsOf(t, other)
	env := awsEnv("AWS_ENDPOINT_URL=" + other.URL()) // the later AWS_ENDPOINT_URL wins
	framework.StartJoinerArgs(t, []string{"--region=" + seoul}, env...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	// The guide's manifest with its one slip fixed (limit: for limits:),
	// which the API server refuses as an unknown field.
	manifest := strings.Replace(framework.ReadSeed(t, "01-t4g-spot-nodepool.yaml"), "\n  limit:\n", "\n  limits:\n", 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	// The class resolves only where the network is: in Seoul.
	framework.Eventually(t, time.Minute, "the EC2NodeClass is Ready", func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(nc.Status.Conditions, "Ready"), fmt.Sprintf("%v", nc.Status.Conditions)
	})
	framework.Kubectl(t, framework.Deployment("web", 2, "250m", "256Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "two web pods run", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "web"})
		return n == 2, fmt.Sprintf("%d running on %v", n, nodes)
	})

	claims := framework.Registered(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims for two small pods, want 1", len(claims))
	}
	nc := claims[0]
	l := nc.Labels
	if !strings.HasPrefix(l[corev1.LabelInstanceTypeStable], "t4g.") || l[corev1.LabelArchStable] != "arm64" || l[v1.LabelCapacityType] != "spot" ||
		l[corev1.LabelTopologyZone] != seoul+"a" || l[corev1.LabelTopologyRegion] != seoul {
		t.Fatalf("NodeClaim %s: type %s arch %s capacity %s zone %s region %s", nc.Name, l[corev1.LabelInstanceTypeStable], l[corev1.LabelArchStable],
			l[v1.LabelCapacityType], l[corev1.LabelTopologyZone], l[corev1.LabelTopologyRegion])
	}
	if want := "aws:///" + seoul + "a/i-"; !strings.HasPrefix(nc.Status.ProviderID, want) {
		t.Fatalf("provider ID %q, want %s...", nc.Status.ProviderID, want)
	}
	node := &corev1.Node{}
	if err := framework.Kube.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
		t.Fatalf("the NodeClaim's node: %v", err)
	}
	// The Node's labels come from the kubelet and the user data, not from
	// Joiner: they show what the instance really is.
	if node.Labels[corev1.LabelArchStable] != "arm64" || node.Labels[corev1.LabelTopologyZone] != seoul+"a" || node.Labels[v1.LabelCapacityType] != "spot" ||
		node.Labels[corev1.LabelInstanceTypeStable] != l[corev1.LabelInstanceTypeStable] {
		t.Fatalf("node %s labels %v", node.Name, node.Labels)
	}

	// EC2's own view: a spot instance of the arm64 image in Seoul.
	id := instanceID(nc.Status.ProviderID)
	out, err := regionEC2(t, other.URL(), seoul).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describing %s in %s: %v", id, seoul, err)
	}
	inst := out.Reservations[0].Instances[0]
	if inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || aws.ToString(inst.Placement.AvailabilityZone) != seoul+"a" ||
		inst.Architecture != ec2types.ArchitectureValuesArm64 {
		t.Fatalf("instance %s: lifecycle %q zone %s architecture %q", id, inst.InstanceLifecycle, aws.ToString(inst.Placement.AvailabilityZone), inst.Architecture)
	}
	fleets := other.Calls("ec2", "CreateFleet")
	if len(fleets) != 1 || fleets[0].Region != seoul || fleets[0].Params["DefaultTargetCapacityType"] != "spot" {
		t.Fatalf("CreateFleet calls %+v, want one spot fleet in %s", fleets, seoul)
	}
	if n := len(fake.Calls("ec2", "CreateFleet")); n != 0 {
		t.Fatalf("%d CreateFleet calls reached the us-east-1 endpoint", n)
	}
}

// regionEC2 is a client of an endpoint in a region, for the test's checks.
func regionEC2(t testing.TB, url, region string) *ec2.Client {
	cfg := clientConfig(t, url, region)
	return ec2.NewFromConfig(cfg)
}

// explainBootsOf is explainBoots for another endpoint.
func explainBootsOf(t testing.TB, s *fakeaws.Server) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, b := range s.Boots() {
			t.Logf("instance %s (%s, %s, %s): state %s, node %q, joined %v, reason %q", b.InstanceID, b.InstanceType, b.ImageID, b.Family, b.State, b.Node, b.Joined, b.Reason)
		}
	})
}
