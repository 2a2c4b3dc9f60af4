package aws

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
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
		var v struct {
			LaunchTemplateVersions []struct {
				LaunchTemplateData struct{ UserData string }
			}
		}
		if out := awsCLIJSON(t, fake, &v, "ec2", "describe-launch-template-versions", "--launch-template-name", name, "--versions", "$Latest"); len(v.LaunchTemplateVersions) != 1 {
			t.Fatalf("describe-launch-template-versions %s:\n%s", name, out)
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

// TestPlacementGroup is issue 19's third acceptance point for
// placementGroupSelector, tried as a user would: the group made with
// awscli, a class that selects it by name, one pod. The instance is
// launched into the group (awscli shows its placement), the NodeClaim and
// Node carry the group's id and partition labels, and a class naming a
// group that does not exist is not Ready, saying which.
func TestPlacementGroup(t *testing.T) {
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	name := fmt.Sprintf("joiner-pg-%d", time.Now().UnixNano())
	awsCLI(t, fake, "ec2", "create-placement-group", "--group-name", name, "--strategy", "partition", "--partition-count", "3")
	t.Cleanup(func() { awsCLI(t, fake, "ec2", "delete-placement-group", "--group-name", name) })
	var groups struct {
		PlacementGroups []struct{ GroupId, GroupName string }
	}
	if awsCLIJSON(t, fake, &groups, "ec2", "describe-placement-groups", "--group-names", name); len(groups.PlacementGroups) != 1 {
		t.Fatalf("describe-placement-groups: %+v", groups)
	}
	pgID := groups.PlacementGroups[0].GroupId

	manifests := strings.Replace(framework.PoolAndClass, "  securityGroupSelectorTerms:", "  placementGroupSelector: {name: "+name+"}\n  securityGroupSelectorTerms:", 1)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("grouped", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "grouped"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	// The pod can run before the NodeClaim's status names its Node (kwok
	// readies the Node first), so wait for the claim to be initialized.
	nc := framework.Initialized(t, 1)[0]
	if got := nc.Labels["karpenter.k8s.aws/placement-group-id"]; got != pgID {
		t.Fatalf("NodeClaim label placement-group-id %q, want %s", got, pgID)
	}
	partition := nc.Labels["karpenter.k8s.aws/placement-group-partition"]
	if partition == "" {
		t.Fatalf("NodeClaim has no placement-group-partition label: %v", nc.Labels)
	}
	framework.Eventually(t, time.Minute, "the Node carries the group's labels", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "node", nc.Status.NodeName, "-o", `jsonpath={.metadata.labels.karpenter\.k8s\.aws/placement-group-id}/{.metadata.labels.karpenter\.k8s\.aws/placement-group-partition}`)
		return out == pgID+"/"+partition, out
	})
	var described struct {
		Reservations []struct {
			Instances []struct {
				Placement struct {
					GroupName       string
					GroupId         string
					PartitionNumber int
				}
			}
		}
	}
	if out := awsCLIJSON(t, fake, &described, "ec2", "describe-instances", "--instance-ids", instanceID(nc.Status.ProviderID)); len(described.Reservations) != 1 || len(described.Reservations[0].Instances) != 1 {
		t.Fatalf("describe-instances:\n%s", out)
	}
	p := described.Reservations[0].Instances[0].Placement
	if p.GroupName != name || p.GroupId != pgID || fmt.Sprint(p.PartitionNumber) != partition {
		t.Fatalf("the instance's placement is %+v; want group %s (%s), partition %s", p, name, pgID, partition)
	}

	// A NodePool that requires one partition gets its nodes in it.
	framework.Kubectl(t, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: partition3}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/placement-group-partition, operator: In, values: ["3"]}
`, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("partition3", 1, "500m", "512Mi", "      nodeSelector: {karpenter.sh/nodepool: partition3}\n"), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the partition-3 pod runs", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "partition3"})
		return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	_, nodes := framework.Running(t, map[string]string{"app": "partition3"})
	for node := range nodes {
		got := framework.Kubectl(t, "", "get", "node", node, "-o", `jsonpath={.spec.providerID}`)
		if awsCLIJSON(t, fake, &described, "ec2", "describe-instances", "--instance-ids", instanceID(got)); described.Reservations[0].Instances[0].Placement.PartitionNumber != 3 {
			t.Fatalf("the partition-3 pod runs on %s, whose instance is in partition %+v", node, described.Reservations[0].Instances[0].Placement)
		}
	}

	// A class whose group does not exist is refused by name.
	framework.Kubectl(t, `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: missing-group}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  placementGroupSelector: {name: no-such-group}
`, "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "the class with a missing group is not Ready", func() (bool, string) {
		out := framework.Kubectl(t, "", "get", "ec2nodeclass", "missing-group", "-o",
			`jsonpath={.status.conditions[?(@.type=="PlacementGroupReady")].reason}|{.status.conditions[?(@.type=="PlacementGroupReady")].message}|{.status.conditions[?(@.type=="Ready")].status}`)
		return strings.HasPrefix(out, "PlacementGroupNotFound|") && strings.Contains(out, `"no-such-group"`) && strings.HasSuffix(out, "|False"), out
	})
}

// TestSpotServiceLinkedRoleMissing is issue 19's fifth acceptance point
// end to end: in an account without the spot service-linked role, a pool
// that allows spot and on-demand gets an on-demand node after one refused
// spot fleet, and the NodeClaim's InsufficientCapacityError event says why
// and how to fix it.
func TestSpotServiceLinkedRoleMissing(t *testing.T) {
	fake.ResetCalls()
	explainBoots(t, fake)
	if err := fake.SetFaults(fakeaws.Faults{SpotRoleMissing: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	pool := strings.Replace(framework.PoolAndClass, "values: [on-demand]", "values: [spot, on-demand]", 1)
	framework.Kubectl(t, pool, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("slr", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "slr"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 || claims[0].Labels["karpenter.sh/capacity-type"] != "on-demand" {
		t.Fatalf("NodeClaims %d, capacity type %q; want one on-demand", len(claims), claims[0].Labels["karpenter.sh/capacity-type"])
	}
	var spot, onDemand int
	for _, c := range fake.Calls("ec2", "CreateFleet") {
		switch c.Params["DefaultTargetCapacityType"] {
		case "spot":
			spot++
		case "on-demand":
			onDemand++
		}
	}
	if spot != 1 || onDemand != 1 {
		t.Fatalf("%d spot and %d on-demand fleets; want the one refused spot fleet, then one on-demand", spot, onDemand)
	}
	events := framework.Kubectl(t, "", "get", "events", "-A", "--field-selector", "reason=InsufficientCapacityError", "-o", "custom-columns=MSG:.message")
	if !strings.Contains(events, "no spot service-linked role") || !strings.Contains(events, "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com") {
		t.Fatalf("InsufficientCapacityError events do not name the missing role and its fix:\n%s", events)
	}
}

// TestCapacityReservation is issue 19's third acceptance point for
// capacityReservationSelectorTerms, tried as a user would: a reservation
// for one m5.large made with awscli, a class that selects it by tag, a pool
// that allows reserved and on-demand. The first node launches into the
// reservation (awscli shows the instance in it, and the reservation full),
// labelled as Karpenter labels it; the second, with the reservation full,
// launches on-demand. Then awscli cancels the reservation: the class stays
// Ready with none listed (as Karpenter's does), the first node is
// relabelled on-demand, and a third pod on the class gets a node.
func TestCapacityReservation(t *testing.T) {
	fake.ResetCalls()
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	t.Cleanup(func() { framework.ResetCluster(t) })
	manifests, crID := teamReservation(t, fake)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "the class lists the reservation", func() (bool, string) {
		got := framework.Kubectl(t, "", "get", "ec2nodeclass", "default", "-o",
			`jsonpath={.status.capacityReservations[*].id}|{.status.conditions[?(@.type=="CapacityReservationsReady")].status}`)
		return got == crID+"|True", got
	})
	spread := `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: reserved}}}
`
	framework.Kubectl(t, framework.Deployment("reserved", 1, "500m", "512Mi", spread), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	claims := framework.NodeClaims(t)
	if len(claims) != 1 {
		t.Fatalf("%d NodeClaims; want one", len(claims))
	}
	first := claims[0]
	if l := first.Labels; l["karpenter.sh/capacity-type"] != "reserved" || l["karpenter.k8s.aws/capacity-reservation-id"] != crID ||
		l["karpenter.k8s.aws/capacity-reservation-type"] != "default" || l["node.kubernetes.io/instance-type"] != "m5.large" || l["topology.kubernetes.io/zone"] != "us-east-1a" {
		t.Fatalf("NodeClaim labels %v; want a reserved m5.large in us-east-1a of %s", l, crID)
	}
	var described struct {
		Reservations []struct {
			Instances []struct{ CapacityReservationId string }
		}
	}
	out := awsCLIJSON(t, fake, &described, "ec2", "describe-instances", "--instance-ids", instanceID(first.Status.ProviderID))
	if len(described.Reservations) != 1 || described.Reservations[0].Instances[0].CapacityReservationId != crID {
		t.Fatalf("describe-instances: the instance is not in %s:\n%s", crID, out)
	}
	var reservations struct {
		CapacityReservations []struct{ AvailableInstanceCount int }
	}
	out = awsCLIJSON(t, fake, &reservations, "ec2", "describe-capacity-reservations", "--capacity-reservation-ids", crID)
	if len(reservations.CapacityReservations) != 1 || reservations.CapacityReservations[0].AvailableInstanceCount != 0 {
		t.Fatalf("describe-capacity-reservations: want the reservation full:\n%s", out)
	}

	framework.Kubectl(t, "", "scale", "deployment/reserved", "--replicas=2")
	framework.Eventually(t, 3*time.Minute, "the second pod runs", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		return n == 2, fmt.Sprintf("%d running", n)
	})
	for _, nc := range framework.NodeClaims(t) {
		if nc.Name != first.Name && nc.Labels["karpenter.sh/capacity-type"] != "on-demand" {
			t.Fatalf("the second NodeClaim is %s; want on-demand, the reservation being full", nc.Labels["karpenter.sh/capacity-type"])
		}
	}

	awsCLI(t, fake, "ec2", "cancel-capacity-reservation", "--capacity-reservation-id", crID)
	framework.Eventually(t, 2*time.Minute, "the class Ready with no reservation listed", func() (bool, string) {
		got := framework.Kubectl(t, "", "get", "ec2nodeclass", "default", "-o",
			`jsonpath={.status.capacityReservations[*].id}|{.status.conditions[?(@.type=="CapacityReservationsReady")].status}|{.status.conditions[?(@.type=="Ready")].status}`)
		return got == "|True|True", got
	})
	framework.Eventually(t, time.Minute, "the first node relabelled on-demand", func() (bool, string) {
		got := framework.Kubectl(t, "", "get", "nodeclaim", first.Name, "-o", `jsonpath={.metadata.labels.karpenter\.sh/capacity-type}`)
		return got == "on-demand", got
	})
	framework.Kubectl(t, "", "scale", "deployment/reserved", "--replicas=3")
	framework.Eventually(t, 3*time.Minute, "the third pod runs, the reservation cancelled", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		return n == 3, fmt.Sprintf("%d running", n)
	})
}
