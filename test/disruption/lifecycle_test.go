package disruption

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// karpenterStamps are hash annotations as Karpenter v1 writes them: its
// own hash versions, with hashes computed its own way.
var karpenterStamps = map[string]string{
	v1.AnnotationNodePoolHash:               "6043272443413522209",
	v1.AnnotationNodePoolHashVersion:        "v3",
	awsv1.AnnotationEC2NodeClassHash:        "13049766342429364493",
	awsv1.AnnotationEC2NodeClassHashVersion: "v6",
}

func annotate(t *testing.T, kind, name string, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	framework.Kubectl(t, "", "patch", kind, name, "--type=merge", "-p", string(patch))
}

// TestKarpenterHashesAreRestamped migrates a NodePool, its EC2NodeClass
// and a NodeClaim as Karpenter left them: carrying Karpenter's hashes under
// Karpenter's hash versions. Joiner cannot compare those hashes with its
// own, so it must re-stamp them, not drift the node. Budgets allow no
// disruption, so a wrong drift would show as a condition and not as a
// replaced node.
func TestKarpenterHashesAreRestamped(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	p := strings.Replace(framework.PoolAndClass, "  template:\n", "  disruption: {consolidateAfter: 40s, budgets: [{nodes: \"0\"}]}\n  template:\n", 1)
	framework.Kubectl(t, p, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	nc := framework.Initialized(t, 1)[0]
	annotate(t, "nodepool", "default", map[string]string{v1.AnnotationNodePoolHash: karpenterStamps[v1.AnnotationNodePoolHash], v1.AnnotationNodePoolHashVersion: "v3"})
	annotate(t, "ec2nodeclass", "default", map[string]string{awsv1.AnnotationEC2NodeClassHash: karpenterStamps[awsv1.AnnotationEC2NodeClassHash], awsv1.AnnotationEC2NodeClassHashVersion: "v6"})
	annotate(t, "nodeclaim", nc.Name, karpenterStamps)

	// The positive signal: every stamp carries Joiner's versions again.
	var got v1.NodeClaim
	var pool v1.NodePool
	var class awsv1.EC2NodeClass
	framework.Eventually(t, time.Minute, "the hashes re-stamped under Joiner's versions", func() (bool, string) {
		ctx := context.Background()
		if err := framework.Kube.Get(ctx, client.ObjectKey{Name: nc.Name}, &got); err != nil {
			return false, err.Error()
		}
		_ = framework.Kube.Get(ctx, client.ObjectKey{Name: "default"}, &pool)
		_ = framework.Kube.Get(ctx, client.ObjectKey{Name: "default"}, &class)
		versions := fmt.Sprintf("nodeclaim %s/%s, nodepool %s, ec2nodeclass %s",
			got.Annotations[v1.AnnotationNodePoolHashVersion], got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion],
			pool.Annotations[v1.AnnotationNodePoolHashVersion], class.Annotations[awsv1.AnnotationEC2NodeClassHashVersion])
		if got.Annotations[v1.AnnotationNodePoolHashVersion] != v1.NodePoolHashVersion || pool.Annotations[v1.AnnotationNodePoolHashVersion] != v1.NodePoolHashVersion ||
			got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion || class.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
			return false, versions
		}
		return true, ""
	})
	// Consolidatable comes from a later pass of the controller that judges
	// drift: it is the sign that drift was judged after the re-stamp.
	if c := framework.Condition(got, v1.ConditionTypeConsolidatable); c != "absent" {
		t.Fatalf("Consolidatable %s before the re-stamp; the test cannot tell a later pass from an earlier one", c)
	}
	if got.Annotations[v1.AnnotationNodePoolHash] != pool.Annotations[v1.AnnotationNodePoolHash] ||
		got.Annotations[awsv1.AnnotationEC2NodeClassHash] != class.Annotations[awsv1.AnnotationEC2NodeClassHash] {
		t.Errorf("re-stamped hashes %q and %q, want the NodePool's %q and the EC2NodeClass's %q",
			got.Annotations[v1.AnnotationNodePoolHash], got.Annotations[awsv1.AnnotationEC2NodeClassHash],
			pool.Annotations[v1.AnnotationNodePoolHash], class.Annotations[awsv1.AnnotationEC2NodeClassHash])
	}
	framework.Eventually(t, 2*time.Minute, "Consolidatable", func() (bool, string) {
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: nc.Name}, &got); err != nil {
			return false, err.Error()
		}
		c := framework.Condition(got, v1.ConditionTypeConsolidatable)
		return c == "True/Consolidatable", c
	})
	if d := framework.Condition(got, v1.ConditionTypeDrifted); d != "absent" {
		t.Fatalf("the migrated NodeClaim drifted: %s", d)
	}
}

// TestTerminationWaitsForVolumeAttachment deletes a NodeClaim whose node
// has a VolumeAttachment: the instance must stay until the attachment is
// gone, so the volume can follow its pod.
func TestTerminationWaitsForVolumeAttachment(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolWith("Never", "720h"), "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("web", 1, "500m", "512Mi", "      terminationGracePeriodSeconds: 0\n"), "apply", "-f", "-")
	nc := framework.Initialized(t, 1)[0]
	pv := "pv-e2e"
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-" + nc.Status.NodeName},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nc.Status.NodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
	if err := framework.Kube.Create(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	// Runs before ResetCluster, which waits for the node to go.
	t.Cleanup(func() { _ = client.IgnoreNotFound(framework.Kube.Delete(context.Background(), va)) })

	framework.Kubectl(t, "", "delete", "nodeclaim", nc.Name, "--wait=false")
	framework.Eventually(t, 2*time.Minute, "termination waiting for the VolumeAttachment", func() (bool, string) {
		var got v1.NodeClaim
		if err := framework.Kube.Get(context.Background(), client.ObjectKey{Name: nc.Name}, &got); apierrors.IsNotFound(err) {
			t.Fatal("the NodeClaim went with its volume attached")
		} else if err != nil {
			return false, err.Error()
		}
		d, v := framework.Condition(got, v1.ConditionTypeDrained), framework.Condition(got, v1.ConditionTypeVolumesDetached)
		return d == "True/Drained" && v == "Unknown/AwaitingVolumeDetachment", "Drained " + d + ", VolumesDetached " + v
	})
	out := framework.Kubectl(t, "", "get", "events", "-A", "--field-selector", "reason=AwaitingVolumeDetachment,involvedObject.name="+nc.Status.NodeName, "-o", "custom-columns=MSG:.message", "--no-headers")
	if !strings.Contains(out, va.Name) {
		t.Errorf("no AwaitingVolumeDetachment event naming %s: %q", va.Name, out)
	}
	if !exists(t, nc.Name) {
		t.Fatal("the NodeClaim went with its volume attached")
	}
	if err := framework.Kube.Delete(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the NodeClaim gone once the volume detached", func() (bool, string) {
		return !exists(t, nc.Name), "still there"
	})
}
