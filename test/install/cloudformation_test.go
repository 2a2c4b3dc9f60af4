package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The stack's resources with the names the guide's commands and eksctl
// configs use (Karpenter v1.14's getting-started stack), by logical ID;
// "" where the resource has no name property.
var guideResources = map[string]string{
	"KarpenterNodeRole":                   "KarpenterNodeRole-${ClusterName}",
	"NodeLifecyclePolicy":                 "KarpenterControllerNodeLifecyclePolicy-${ClusterName}",
	"IAMIntegrationPolicy":                "KarpenterControllerIAMIntegrationPolicy-${ClusterName}",
	"EKSIntegrationPolicy":                "KarpenterControllerEKSIntegrationPolicy-${ClusterName}",
	"InterruptionPolicy":                  "KarpenterControllerInterruptionPolicy-${ClusterName}",
	"ZonalShiftPolicy":                    "KarpenterControllerZonalShiftPolicy-${ClusterName}",
	"ResourceDiscoveryPolicy":             "KarpenterControllerResourceDiscoveryPolicy-${ClusterName}",
	"KarpenterInterruptionQueue":          "${ClusterName}",
	"KarpenterInterruptionQueuePolicy":    "",
	"ScheduledChangeRule":                 "",
	"SpotInterruptionRule":                "",
	"RebalanceRule":                       "",
	"InstanceStateChangeRule":             "",
	"CapacityReservationInterruptionRule": "",
}

func TestCloudFormation(t *testing.T) {
	path := filepath.Join(cluster.Root, "deploy", "cloudformation", "joiner.yaml")
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatal("cfn-lint is not installed (pip install cfn-lint)")
	}
	if out, err := exec.Command(lint, path).CombinedOutput(); err != nil {
		t.Errorf("cfn-lint: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]any `yaml:"Parameters"`
		Resources  map[string]struct {
			Properties map[string]any `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Parameters["ClusterName"]; !ok {
		t.Error("the guide's command passes ClusterName; the stack has no such parameter")
	}
	got := map[string]string{}
	for id, r := range doc.Resources {
		name := ""
		for _, key := range []string{"RoleName", "ManagedPolicyName", "QueueName"} {
			if v, ok := r.Properties[key].(string); ok {
				name = v
			}
		}
		got[id] = name
	}
	if !reflect.DeepEqual(got, guideResources) {
		var ids []string
		for id := range got {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		t.Errorf("resources %v\n got %v\nwant %v", ids, got, guideResources)
	}
}
