//go:build leastprivilege

package aws

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestOwnFeaturesUnderOwnStack runs Joiner's own features under its own
// stack with IAM enforced, where the guide's walkthrough does not reach:
// a class that selects a capacity reservation and a placement group (EC2
// authorizes the launch on both resources), a class whose instance
// profile holds another role (the new one is checked with iam:GetRole
// before the old leaves the profile), a drift on a new AMI, whose
// replacement launches on-demand (the reservation is full) and whose old
// node is terminated, a profile an earlier role left under the class's
// path, which is collected, and a class with an EFA interface, whose node
// launches. An RI and a Savings Plan are bought first, so the
// commitments' reads run under the stack too. Between them, EC2's status check fails on one node and another
// node's kubelet dies: each is replaced and its instance terminated. No
// call is refused.
func TestOwnFeaturesUnderOwnStack(t *testing.T) {
	kubeconfig := chartRBAC(t)
	framework.ResetCluster(t)
	f, role := underStack(t, joinerStack, sixPolicies, guideV114)
	ownFeatures(t, f, role, kubeconfig)
}

// ownFeatures runs TestOwnFeaturesUnderOwnStack's scenario on f, with a
// controller of its own, and leaves the cluster empty.
func ownFeatures(t *testing.T, f *fakeaws.Server, role, kubeconfig string) {
	ctx := context.Background()
	adminIAM := iam.NewFromConfig(adminConfig(t, f))

	// The profile Joiner would make for class "default", holding a role
	// that is not the class's (left by an edit, or an older controller),
	// tagged as the stack's conditions expect.
	if _, err := adminIAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("KarpenterNodeRole-old"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	profile := instanceprofile.Name(clusterName, region, "default", "KarpenterNodeRole-"+clusterName)
	if _, err := adminIAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(profile), Tags: []iamtypes.Tag{
		{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned")}, {Key: aws.String("topology.kubernetes.io/region"), Value: aws.String(region)},
		{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}, {Key: aws.String("eks:eks-cluster-name"), Value: aws.String(clusterName)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminIAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("KarpenterNodeRole-old")}); err != nil {
		t.Fatal(err)
	}

	team := fmt.Sprintf("ml-%d", time.Now().UnixNano())
	awsCLI(t, f, "ec2", "create-capacity-reservation", "--instance-type", "m5.large", "--instance-platform", "Linux/UNIX",
		"--availability-zone", "us-east-1a", "--instance-count", "1", "--tag-specifications", "ResourceType=capacity-reservation,Tags=[{Key=team,Value="+team+"}]")
	group := fmt.Sprintf("joiner-pg-%d", time.Now().UnixNano())
	awsCLI(t, f, "ec2", "create-placement-group", "--group-name", group, "--strategy", "partition", "--partition-count", "3")
	// Commitments the scenario's pool cannot use (a t3, outside its
	// categories; a plan too small for its types), so that its launches
	// stay as they are: their reads (the plan's rates among them) run
	// under the stack.
	buyRIs(t, f, "t3.nano", "1")
	buySavingsPlan(t, f, "0.01")

	// Node repair on, its toleration shortened by the test hook; the
	// guide's interruption queue turns the status checks on.
	j := startController(t, f, role, kubeconfig, guideV114,
		"FEATURE_GATES=NodeOverlay=false,NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=false,StaticCapacity=false,CapacityBuffer=false",
		"JOINER_TEST_REPAIR_TOLERATION=20s")
	defer j.Stop(syscall.SIGTERM)
	defer framework.ResetCluster(t)
	manifests := strings.Replace(framework.PoolAndClass, "  securityGroupSelectorTerms:",
		"  capacityReservationSelectorTerms: [{tags: {team: "+team+"}}]\n  placementGroupSelector: {name: "+group+"}\n  securityGroupSelectorTerms:", 1)
	manifests = strings.Replace(manifests, "values: [on-demand]", "values: [reserved, on-demand]", 1)
	framework.Kubectl(t, manifests, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("reserved", 1, "500m", "512Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs on a reserved node in the group", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		claims := framework.NodeClaims(t)
		if n != 1 || len(claims) != 1 {
			return false, fmt.Sprintf("%d running, %d NodeClaims", n, len(claims))
		}
		l := claims[0].Labels
		return l["karpenter.sh/capacity-type"] == "reserved" && l["karpenter.k8s.aws/placement-group-id"] != "",
			fmt.Sprintf("capacity type %q, placement group %q", l["karpenter.sh/capacity-type"], l["karpenter.k8s.aws/placement-group-id"])
	})
	out, err := adminIAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
	if err != nil || len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != "KarpenterNodeRole-"+clusterName {
		t.Fatalf("the class's profile after Joiner: %+v (%v); want the class's role alone", out, err)
	}

	// A new AMI: the node drifts, an on-demand replacement (the
	// reservation is full) takes the pod, the old instance is terminated.
	first := framework.NodeClaims(t)[0]
	param := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id", clusterMinor(t))
	if _, err := f.PublishImage(ctx, param, ""); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 4*time.Minute, "the drifted node replaced on-demand and its instance terminated", func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		if len(claims) != 1 || claims[0].Name == first.Name || n != 1 {
			return false, fmt.Sprintf("%d NodeClaims, %d running", len(claims), n)
		}
		state := fakeInstances(t, f)[instanceID(first.Status.ProviderID)]
		return state == "terminated" && claims[0].Labels["karpenter.sh/capacity-type"] == "on-demand",
			fmt.Sprintf("old instance %s, new NodeClaim %s", state, claims[0].Labels["karpenter.sh/capacity-type"])
	})

	// EC2's system check fails on the replacement's instance, as it has
	// for three minutes: the status poller (ec2:DescribeInstanceStatus)
	// deletes the NodeClaim and the instance is terminated.
	impaired := framework.NodeClaims(t)[0]
	if err := f.SetInstanceHealth(fakeaws.InstanceHealth{InstanceID: instanceID(impaired.Status.ProviderID), SystemStatus: "impaired",
		ImpairedSince: time.Now().Add(-3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	replaced(t, f, j, impaired, "deleting unhealthy instance", "the impaired node replaced and its instance terminated")

	// Node repair: the next replacement's kubelet dies; its NotReady
	// outlasts the (shortened) toleration, the node is replaced and its
	// instance terminated.
	dead := framework.NodeClaims(t)[0]
	if _, err := f.KillKubelet(ctx, instanceID(dead.Status.ProviderID)); err != nil {
		t.Fatal(err)
	}
	replaced(t, f, j, dead, "deleting unhealthy node", "the dead node repaired and its instance terminated")

	// A profile an earlier role of the class left under the class's path
	// (the stack lets Joiner pass only its node role, so the test makes it
	// as Karpenter would have): collected, under the stack's grants, as no
	// class uses it and no NodeClaim names it.
	uid := strings.Trim(framework.Kubectl(t, "", "get", "ec2nodeclass", "default", "-o", "jsonpath={.metadata.uid}"), "'\n ")
	stale := clusterName + "_stale_profile"
	if _, err := adminIAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(stale),
		Path: aws.String(instanceprofile.Path(region, clusterName, uid)), Tags: []iamtypes.Tag{
			{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned")}, {Key: aws.String("topology.kubernetes.io/region"), Value: aws.String(region)},
			{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}, {Key: aws.String("eks:eks-cluster-name"), Value: aws.String(clusterName)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminIAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(stale), RoleName: aws.String("KarpenterNodeRole-old")}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the stale profile collected", func() (bool, string) {
		_, err := adminIAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(stale)})
		return err != nil, fmt.Sprintf("%s still exists", stale)
	})

	// EFA: a class with an efa-only interface beside the primary one, and
	// a pool of a type that holds it; the launch template carries both
	// interfaces, and the fleet call that uses it is authorized.
	efa := strings.Replace(framework.PoolAndClass, "metadata: {name: default}\nspec:\n  role:", "metadata: {name: efa}\nspec:\n  networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}]\n  role:", 1)
	efa = strings.Replace(efa, "metadata: {name: default}\nspec:\n  template:", "metadata: {name: efa}\nspec:\n  template:\n    metadata: {labels: {pool: efa}}", 1)
	efa = strings.Replace(efa, "name: default}\n      requirements:", "name: efa}\n      requirements:\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [c5n.18xlarge]}", 1)
	framework.Kubectl(t, efa, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("efa", 1, "500m", "512Mi", "      nodeSelector: {pool: efa}\n"), "apply", "-f", "-")
	framework.Eventually(t, 3*time.Minute, "the pod runs on an EFA node", func() (bool, string) {
		n, _ := framework.Running(t, map[string]string{"app": "efa"})
		return n == 1, fmt.Sprintf("%d running", n)
	})
	if out := awsCLI(t, f, "ec2", "describe-launch-template-versions", "--versions", "$Latest", "--filters", "Name=tag:karpenter.k8s.aws/ec2nodeclass,Values=efa"); !strings.Contains(out, `"InterfaceType": "efa-only"`) {
		t.Errorf("no launch template of class efa has an efa-only interface:\n%s", out)
	}
	framework.Kubectl(t, "", "delete", "deployment", "efa")

	var getRole int
	for _, c := range f.Calls("", "") {
		if c.Service == "iam" && c.Action == "GetRole" {
			getRole++
		}
		if c.Fault == "iamDenied" {
			t.Errorf("refused: %s:%s by %s (%s)", c.Service, c.Action, c.Principal, c.ErrorCode)
		}
		if unmodelled(c) {
			t.Errorf("the endpoint could not answer %s:%s (%d %s: %s)", c.Service, c.Action, c.Status, c.ErrorCode, c.ErrorMessage)
		}
	}
	if getRole == 0 {
		t.Error("no iam:GetRole call: the profile's role was not checked")
	}
	for _, line := range strings.Split(j.Logs(), "\n") {
		for _, bad := range []string{"AccessDenied", "UnauthorizedOperation", "not authorized"} {
			if strings.Contains(line, bad) {
				t.Errorf("the controller's log shows %q: %s", bad, line)
			}
		}
	}
}

// replaced waits until old's NodeClaim is gone, its instance terminated,
// and the "reserved" pod runs on another node, with the decision logged
// once.
func replaced(t *testing.T, f *fakeaws.Server, j *framework.Joiner, old v1.NodeClaim, line, what string) {
	t.Helper()
	before := j.Count(line)
	framework.Eventually(t, 4*time.Minute, what, func() (bool, string) {
		claims := framework.NodeClaims(t)
		n, _ := framework.Running(t, map[string]string{"app": "reserved"})
		if len(claims) != 1 || claims[0].Name == old.Name || n != 1 {
			return false, fmt.Sprintf("%d NodeClaims, %d running", len(claims), n)
		}
		state := fakeInstances(t, f)[instanceID(old.Status.ProviderID)]
		return state == "terminated", "old instance " + state
	})
	if got := j.Count(line) - before; got != 1 {
		t.Fatalf("%q logged %d times, want once", line, got)
	}
}
