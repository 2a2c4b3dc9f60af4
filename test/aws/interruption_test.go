package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TestSpotInterruptionDrainsBeforeTheInstanceGoes sends the interruption
// warning EC2 sends two minutes before reclaiming a spot instance to the
// queue EventBridge feeds, and expects the node drained, its pods moved to
// a replacement in another offering, and the instance terminated.
func TestSpotInterruptionDrainsBeforeTheInstanceGoes(t *testing.T) {
	framework.ResetCluster(t)
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv("INTERRUPTION_QUEUE="+clusterName)...)
	// Before Joiner stops: its finalizers must run for the cluster to empty.
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), `values: ["on-demand"]`, `values: ["spot"]`, 1)
	framework.Kubectl(t, manifest, "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "five inflate pods run on spot", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		return n == 5, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	for _, c := range claims {
		if c.Labels[v1.LabelCapacityType] != v1.CapacityTypeSpot {
			t.Fatalf("NodeClaim %s is %s, want spot", c.Name, c.Labels[v1.LabelCapacityType])
		}
	}
	first, others := claims[0], len(claims)-1
	id := instanceID(first.Status.ProviderID)

	sendToQueue(t, fmt.Sprintf(`{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":%q,"resources":["arn:aws:ec2:%s:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		time.Now().UTC().Format(time.RFC3339), region, region, id, id))

	var second v1.NodeClaim
	framework.Eventually(t, 3*time.Minute, "the pods move to a replacement", func() (bool, string) {
		claims := framework.NodeClaims(t)
		var fresh []v1.NodeClaim
		for _, c := range claims {
			if c.Name == first.Name {
				return false, "the interrupted NodeClaim is still there"
			}
			if c.CreationTimestamp.After(first.CreationTimestamp.Time) && meta.IsStatusConditionTrue(c.Status.Conditions, v1.ConditionTypeInitialized) {
				fresh = append(fresh, c)
			}
		}
		n, _ := framework.Running(t, map[string]string{"app": "inflate"})
		if len(fresh) == 0 || n != 5 {
			return false, fmt.Sprintf("%d running, %d NodeClaims (%d others before)", n, len(claims), others)
		}
		second = fresh[0]
		return true, ""
	})
	if j.Count("initiating delete from interruption message") != 1 {
		t.Fatalf("%d interruption deletions logged, want 1", j.Count("initiating delete from interruption message"))
	}
	if framework.WaitForEvent(t, time.Minute, "SpotInterrupted", first.Name, "Spot interruption warning") == "" {
		t.Fatal("no SpotInterrupted event")
	}
	was := first.Labels[corev1.LabelInstanceTypeStable] + "/" + first.Labels[corev1.LabelTopologyZone]
	now := second.Labels[corev1.LabelInstanceTypeStable] + "/" + second.Labels[corev1.LabelTopologyZone]
	if was == now && second.Labels[v1.LabelCapacityType] == v1.CapacityTypeSpot {
		t.Fatalf("the replacement went back to the interrupted offering %s", was)
	}
	framework.Eventually(t, 2*time.Minute, "the interrupted instance is terminated", func() (bool, string) {
		state := instances(t)[id]
		return state == "terminated", state
	})
}

func sendToQueue(t testing.TB, body string) {
	t.Helper()
	cfg := clientConfig(t, fake.URL(), region)
	client := sqs.NewFromConfig(cfg)
	url, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(clusterName)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}
