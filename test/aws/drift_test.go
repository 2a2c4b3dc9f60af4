package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	awsprovider "github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
)

// TestDriftOnANewAMI: AWS releases a new al2023 image (the public SSM
// parameter changes). Within the AMI watch's period the class's status
// lists it, both NodeClaims become Drifted with AMIDrift, and they are
// replaced by instances of the new image, one at a time as the pool's
// budget of one node allows: a watch on the NodeClaims counts those
// disrupting (marked with a DisruptionReason, or being deleted) at every
// change.
func TestDriftOnANewAMI(t *testing.T) {
	ctx := context.Background()
	fake.ResetCalls()
	explainBoots(t, fake)
	j := framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	// Drift alone disrupts: no consolidation.
	pool := strings.Replace(framework.PoolAndClass, "  template:\n",
		"  disruption:\n    consolidateAfter: Never\n    budgets: [{nodes: \"1\"}]\n  template:\n", 1)
	framework.Kubectl(t, pool, "apply", "-f", "-")
	spread := `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: drift}}}
`
	framework.Kubectl(t, framework.Deployment("drift", 2, "500m", "512Mi", spread), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "two pods run", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "drift"})
		return n == 2, fmt.Sprintf("%d running on %v", n, nodes)
	})
	old := framework.Initialized(t, 2)
	oldNames := []string{old[0].Name, old[1].Name}

	w := watchClaims(t)
	param := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id", clusterMinor(t))
	for _, nc := range old {
		if nc.Labels["kubernetes.io/arch"] != "amd64" {
			t.Fatalf("NodeClaim %s is %s; the test releases an amd64 image", nc.Name, nc.Labels["kubernetes.io/arch"])
		}
	}
	published, err := fake.PublishImage(ctx, param, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range old {
		if nc.Status.ImageID == published.ImageID {
			t.Fatalf("NodeClaim %s already runs the new image %s", nc.Name, published.ImageID)
		}
	}

	// The watch period is 30s; the class's own resync, 5 minutes.
	framework.Eventually(t, 90*time.Second, "the class's status lists the new image "+published.ImageID, func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(ctx, types.NamespacedName{Name: "default"}, nc); err != nil {
			return false, err.Error()
		}
		var ids []string
		for _, ami := range nc.Status.AMIs {
			ids = append(ids, ami.ID)
		}
		return slices.Contains(ids, published.ImageID), strings.Join(ids, " ")
	})
	framework.Eventually(t, 4*time.Minute, "both NodeClaims replaced by instances of the new image", func() (bool, string) {
		claims := framework.NodeClaims(t)
		var state []string
		fresh := 0
		for _, nc := range claims {
			state = append(state, fmt.Sprintf("%s(%s %s %s)", nc.Name, nc.Status.ImageID, framework.Condition(nc, v1.ConditionTypeDrifted), framework.Condition(nc, v1.ConditionTypeInitialized)))
			if nc.Status.ImageID == published.ImageID && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) && !slices.Contains(oldNames, nc.Name) {
				fresh++
			}
		}
		n, _ := framework.Running(t, map[string]string{"app": "drift"})
		return fresh == 2 && len(claims) == 2 && n == 2, fmt.Sprintf("%d running; %s", n, strings.Join(state, ", "))
	})

	most, drifted, reasons := w.results(t)
	for _, name := range oldNames {
		if drifted[name] != awsprovider.ReasonAMIDrift {
			t.Errorf("NodeClaim %s was Drifted with %q, want %s", name, drifted[name], awsprovider.ReasonAMIDrift)
		}
		if reasons[name] != string(v1.DisruptionReasonDrifted) {
			t.Errorf("NodeClaim %s was disrupted for %q, want %s", name, reasons[name], v1.DisruptionReasonDrifted)
		}
	}
	if most > 1 {
		t.Errorf("%d NodeClaims were disrupting at once; the budget allows 1", most)
	}
	if most == 0 {
		t.Error("the watch saw no NodeClaim disrupting")
	}
	decisions := 0
	for _, line := range strings.Split(j.Logs(), "\n") {
		if strings.Contains(line, `"message":"disrupting nodeclaim(s)`) {
			if !strings.Contains(line, `"reason":"drifted"`) {
				t.Errorf("a disruption other than drift: %s", line)
			}
			decisions++
		}
	}
	if decisions != 2 {
		t.Errorf("%d drift decisions for two drifted NodeClaims", decisions)
	}
}

// clusterMinor is the control plane's "major.minor", which alias parameters
// are named for.
func clusterMinor(t testing.TB) string {
	d, err := discovery.NewDiscoveryClientForConfig(framework.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.Major + "." + strings.TrimRight(v.Minor, "+")
}
