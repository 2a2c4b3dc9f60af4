package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// instanceTags are an instance's tags.
func instanceTags(t testing.TB, id string) map[string]string {
	t.Helper()
	out, err := ec2Client(t).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			for _, tag := range i.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
		}
	}
	return tags
}

// onlyClaim waits for the one NodeClaim to be launched, and returns it.
func onlyClaim(t testing.TB) v1.NodeClaim {
	t.Helper()
	var nc v1.NodeClaim
	framework.Eventually(t, 2*time.Minute, "one launched NodeClaim", func() (bool, string) {
		claims := framework.NodeClaims(t)
		if len(claims) != 1 {
			return false, fmt.Sprintf("%d NodeClaims", len(claims))
		}
		nc = claims[0]
		return nc.Status.ProviderID != "", "no provider ID yet"
	})
	return nc
}

// TestDeniedAfterLaunch refuses, as IAM would, the calls Joiner makes
// after CreateFleet has launched an instance: describing it and tagging it
// with its NodeClaim, then terminating it. One Joiner, one instance, the
// denials lifted one at a time so each step shows which action it names.
//
// What a Karpenter user expects: the launch stands (the NodeClaim keeps
// its instance, nothing is launched twice or leaked), the NodeClaim's
// events and the log name the action to allow, and once it is allowed
// the instance gets its tags; a NodeClaim whose instance cannot be
// terminated keeps its finalizer until it can.
func TestDeniedAfterLaunch(t *testing.T) {
	framework.ResetCluster(t)
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	t.Cleanup(func() { deny(t) })
	framework.Kubectl(t, badClass{}.manifest("denied-launch"), "apply", "-f", "-")
	waitClassCondition(t, "denied-launch", awsv1.ConditionTypeReady, awsv1.ConditionTypeReady)
	fake.ResetCalls()
	deny(t, "ec2:DescribeInstances", "ec2:CreateTags")
	framework.Kubectl(t, badPool("denied-launch"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("waiting", 1, "1", "1Gi", ""), "apply", "-f", "-")

	nc := onlyClaim(t)
	id := instanceID(nc.Status.ProviderID)
	for _, tc := range []struct {
		action string
		still  []string
	}{
		{"ec2:DescribeInstances", []string{"ec2:DescribeInstances", "ec2:CreateTags"}},
		{"ec2:CreateTags", []string{"ec2:CreateTags"}},
	} {
		deny(t, tc.still...)
		fix := "allow " + tc.action + " in the IAM policy"
		t.Logf("event: %s", framework.WaitForEvent(t, time.Minute, "TaggingFailed", nc.Name, fix))
		waitErrorLog(t, j, "tagging the nodeclaim's instance", fix)
		// The test's client is refused as Joiner's is: it looks once
		// DescribeInstances is allowed.
		if tc.action == "ec2:DescribeInstances" {
			continue
		}
		if got := instanceTags(t, id)["karpenter.sh/nodeclaim"]; got != "" {
			t.Fatalf("instance %s tagged with NodeClaim %q while %s is denied", id, got, tc.action)
		}
	}
	// The launch stands: the node joins untagged. Once it has, the
	// NodeClaim stops changing, so only the tagging's own retry can tag
	// the instance after the denial is lifted.
	framework.Eventually(t, 2*time.Minute, "the pod running", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "waiting"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	deny(t)
	framework.Eventually(t, time.Minute, "the instance tagged with its NodeClaim and a Name", func() (bool, string) {
		tags := instanceTags(t, id)
		return tags["karpenter.sh/nodeclaim"] == nc.Name && tags["Name"] != "", fmt.Sprint(tags)
	})
	framework.WantClaims(t, 1)
	if got := framework.NodeClaims(t)[0]; got.Name != nc.Name || got.Status.ProviderID != nc.Status.ProviderID {
		t.Fatalf("NodeClaim %s (%s), want %s (%s) kept", got.Name, got.Status.ProviderID, nc.Name, nc.Status.ProviderID)
	}
	if n := launches(); n != 1 {
		t.Fatalf("%d instances launched for one pod", n)
	}
	running := 0
	for _, state := range instances(t) {
		if state == "running" || state == "pending" {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d instances running, want the NodeClaim's only: %v", running, instances(t))
	}

	// Terminating refused: the NodeClaim stays, with its finalizer, until
	// it is allowed.
	// No pod left to replace the node for: the NodeClaim's deletion is
	// all that happens.
	framework.Kubectl(t, "", "scale", "deployment", "waiting", "--replicas=0")
	deny(t, "ec2:TerminateInstances")
	framework.Kubectl(t, "", "delete", "nodeclaim", nc.Name, "--wait=false", "--ignore-not-found")
	fix := "allow ec2:TerminateInstances in the IAM policy"
	t.Logf("event: %s", framework.WaitForEvent(t, time.Minute, "TerminationFailed", nc.Name, fix))
	waitErrorLog(t, j, "terminating the nodeclaim's instance", fix)
	got := &v1.NodeClaim{}
	if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got); err != nil {
		t.Fatalf("the NodeClaim is gone while its instance could not be terminated: %v", err)
	}
	if !controllerutil.ContainsFinalizer(got, v1.TerminationFinalizer) {
		t.Fatalf("the NodeClaim lost its finalizer: %v", got.Finalizers)
	}
	if state := instances(t)[id]; state != "running" {
		t.Fatalf("instance %s is %s while TerminateInstances is denied", id, state)
	}
	deny(t)
	framework.Eventually(t, 2*time.Minute, "the NodeClaim gone and its instance terminated", func() (bool, string) {
		state := instances(t)[id]
		err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: nc.Name}, &v1.NodeClaim{})
		return apierrors.IsNotFound(err) && (state == "terminated" || state == "shutting-down"), fmt.Sprintf("NodeClaim: %v, instance %s", err, state)
	})
}
