package aws

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestRAID0FiftyGiBPod is issue 19's first acceptance point, as a user
// would try it: one pod asking for 50 GiB of ephemeral storage, a class with
// instanceStorePolicy: RAID0 and a pool of NVMe types, no pool limit. The
// scheduler plans the node's storage as its instance store; the user data
// must make the image build the array, or the node comes up with its 20 GiB
// root volume, the pod never fits and every batch launches another node.
// The fake's boot reads the storage strategy from the user data as nodeadm
// would, so the Node is only as large as what Joiner wrote asks for.
func TestRAID0FiftyGiBPod(t *testing.T) {
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })

	manifests := strings.Replace(framework.PoolAndClass, "  securityGroupSelectorTerms:", "  instanceStorePolicy: RAID0\n  securityGroupSelectorTerms:", 1)
	manifests = strings.Replace(manifests, "      requirements:\n",
		"      requirements:\n      - {key: karpenter.k8s.aws/instance-local-nvme, operator: Exists}\n", 1)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Kubectl(t, `apiVersion: v1
kind: Pod
metadata: {name: scratch, labels: {app: scratch}}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.9
    resources: {requests: {cpu: 500m, memory: 512Mi, ephemeral-storage: 50Gi}}
`, "apply", "-f", "-")
	framework.Eventually(t, 4*time.Minute, "the 50 GiB pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "scratch"})
		return n == 1, fmt.Sprintf("%d running, %d NodeClaims", n, len(framework.NodeClaims(t)))
	})

	claims := framework.NodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims for one pod; want one", len(claims))
	}
	if n := len(launchCalls()); n != 1 {
		t.Fatalf("%d launches for one pod; want one", n)
	}
	node := framework.Kubectl(t, "", "get", "node", claims[0].Status.NodeName, "-o", "jsonpath={.status.capacity.ephemeral-storage}")
	capacity, err := resource.ParseQuantity(strings.TrimSpace(node))
	if err != nil {
		t.Fatalf("node capacity %q: %v", node, err)
	}
	if capacity.Cmp(resource.MustParse("50Gi")) < 0 {
		t.Fatalf("node %s has %s of ephemeral storage, less than the pod's 50Gi", claims[0].Status.NodeName, capacity.String())
	}
	t.Logf("%s (%s) has %s of ephemeral storage", claims[0].Status.NodeName, claims[0].Labels[corev1.LabelInstanceTypeStable], capacity.String())

	// The launch template, read back with awscli, asks nodeadm for the array.
	var templates []string
	for _, c := range fake.Calls("ec2", "CreateLaunchTemplate") {
		if name, ok := c.Params["LaunchTemplateName"].(string); ok {
			templates = append(templates, name)
		}
	}
	if len(templates) == 0 {
		t.Fatal("no CreateLaunchTemplate call since the test began")
	}
	for _, name := range templates {
		out := awsCLI(t, fake, "ec2", "describe-launch-template-versions", "--launch-template-name", name, "--versions", "$Latest", "--output", "json")
		var v struct {
			LaunchTemplateVersions []struct {
				LaunchTemplateData struct{ UserData string }
			}
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.LaunchTemplateVersions) != 1 {
			t.Fatalf("describe-launch-template-versions %s: %v\n%s", name, err, out)
		}
		raw, err := base64.StdEncoding.DecodeString(v.LaunchTemplateVersions[0].LaunchTemplateData.UserData)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "localStorage:\n      strategy: RAID0") {
			t.Fatalf("launch template %s's user data does not set localStorage.strategy: RAID0:\n%s", name, raw)
		}
	}
}
