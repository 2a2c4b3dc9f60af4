package aws

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestLeakedInstancesAreTerminated launches instances the way a Joiner that
// crashed mid-launch would leave them: tagged for the cluster and a pool,
// with no NodeClaim. The one tagged for this cluster goes after the grace
// period; one of another cluster, launched with it, stays.
func TestLeakedInstancesAreTerminated(t *testing.T) {
	framework.ResetCluster(t)
	explainBoots(t, fake)
	client := ec2Client(t)
	images, err := client.DescribeImages(context.Background(), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("no image: %v", err)
	}
	launch := func(cluster string) string {
		out, err := client.RunInstances(context.Background(), &ec2.RunInstancesInput{
			ImageId: images.Images[0].ImageId, InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
				{Key: aws.String("kubernetes.io/cluster/" + cluster), Value: aws.String("owned")},
				{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Instances[0].InstanceId)
	}
	leaked, foreign := launch(clusterName), launch("another-cluster")
	t.Cleanup(func() {
		_, _ = client.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{foreign}})
	})
	j := framework.StartJoiner(t, awsEnv("GARBAGE_COLLECT_MIN_AGE=5s", "GARBAGE_COLLECT_INTERVAL=2s")...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Eventually(t, 2*time.Minute, "the leaked instance is terminated", func() (bool, string) {
		state := instances(t)[leaked]
		return state == "terminated", state
	})
	if n := j.Count("garbage collected instance without a nodeclaim"); n != 1 {
		t.Fatalf("%d instances garbage collected, want 1", n)
	}
	if state := instances(t)[foreign]; state != "running" {
		t.Fatalf("another cluster's instance is %s", state)
	}
}
