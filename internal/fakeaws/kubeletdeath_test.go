package fakeaws_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestDeadKubelet kills the kubelet of one running instance through the
// admin API and terminates another. The killed kubelet's Node turns
// NotReady once its heartbeats are older than the grace period, with the
// instance still running, and its pod stays terminating when deleted (no
// kubelet confirms it), while a live Node's pod goes at once.
func TestDeadKubelet(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	kube := must(kubernetes.NewForConfig(cluster.Config))(t)
	launch := func() (string, string) {
		run := must(c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId:      aws.String(imageID(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")),
			InstanceType: "m5.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(subnetIn("us-east-1a")),
			UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(al2023UserData(cluster.Config.Host, cluster.Config.CAData)))),
		}))(t)
		id := aws.ToString(run.Instances[0].InstanceId)
		t.Cleanup(func() { terminate(t, id) })
		boot := waitBoot(t, id)
		if !boot.Joined {
			t.Fatalf("instance %s did not join: %s", id, boot.Reason)
		}
		waitNode(t, kube, boot.Node, ready)
		return id, boot.Node
	}
	hung, hungNode := launch()
	ended, endedNode := launch()
	_, liveNode := launch()
	one := int64(1)
	pods := map[string]string{}
	for _, n := range []string{hungNode, endedNode, liveNode} {
		p := must(kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "on-node-"},
			Spec: corev1.PodSpec{NodeName: n, TerminationGracePeriodSeconds: &one, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "c", Image: "app"}}}}, metav1.CreateOptions{}))(t)
		pods[n] = p.Name
		t.Cleanup(func() {
			_ = kube.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
	}
	for n, p := range pods {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := kube.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{})
			return err == nil && got.Status.Phase == corev1.PodRunning, nil
		}); err != nil {
			t.Fatalf("pod %s on %s never ran: %v", p, n, err)
		}
	}

	var boot fakeaws.Boot
	if code := admin(t, http.MethodPost, "/_fake/kubelet/kill", map[string]string{"instanceId": hung}, &boot); code != http.StatusOK || !boot.KubeletDead {
		t.Fatalf("kill answered %d, %+v", code, boot)
	}
	if code := admin(t, http.MethodPost, "/_fake/kubelet/kill", map[string]string{"instanceId": "i-0000000000missing"}, nil); code != http.StatusBadRequest {
		t.Errorf("killing the kubelet of an unknown instance answered %d, want 400", code)
	}
	terminate(t, ended)
	waitNode(t, kube, endedNode, nil) // deleted, as the cloud controller manager does
	// The hung Node turns NotReady, which takes the grace period: by then
	// kwok has long seen that it lost the lease.
	waitNode(t, kube, hungNode, func(n *corev1.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionUnknown
			}
		}
		return false
	})

	// The hung Node's pod is deleted first: kwok takes the deletions in
	// order, so once the live Node's pod is gone (the positive signal)
	// kwok has had the hung one's and let it be.
	for _, n := range []string{hungNode, liveNode} {
		if err := kube.CoreV1().Pods("default").Delete(ctx, pods[n], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods("default").Get(ctx, pods[liveNode], metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the live Node's pod was never deleted: %v", err)
	}
	if got, err := kube.CoreV1().Pods("default").Get(ctx, pods[hungNode], metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("the pod on %s (dead kubelet) is %v, %v: want it still terminating", hungNode, err, got)
	}
	if st := instanceState(t, hung); st != "running" {
		t.Errorf("the instance whose kubelet died is %s, want running", st)
	}
	for _, b := range fake.Boots() {
		if b.InstanceID == ended && !b.KubeletDead {
			t.Errorf("the terminated instance's kubelet still runs: %+v", b)
		}
	}
}

func instanceState(t *testing.T, id string) string {
	t.Helper()
	out := must(clients(t).EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}))(t)
	return string(out.Reservations[0].Instances[0].State.Name)
}
