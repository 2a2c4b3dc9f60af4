package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// badClass is an EC2NodeClass like the guides', with the fields a case
// spoils; empty fields keep the guides' values.
type badClass struct {
	role, amiFamily, amiTerms, subnetTerms, securityGroupTerms, userData string
}

func (c badClass) manifest(name string) string {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	discovery := "[{tags: {karpenter.sh/discovery: " + clusterName + "}}]"
	out := fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: %s}
spec:
  role: %s
  amiSelectorTerms: %s
  subnetSelectorTerms: %s
  securityGroupSelectorTerms: %s
`, name, or(c.role, "KarpenterNodeRole-"+clusterName), or(c.amiTerms, "[{alias: al2023@latest}]"),
		or(c.subnetTerms, discovery), or(c.securityGroupTerms, discovery))
	if c.amiFamily != "" {
		out += "  amiFamily: " + c.amiFamily + "\n"
	}
	if c.userData != "" {
		out += "  userData: |\n    " + strings.ReplaceAll(strings.TrimRight(c.userData, "\n"), "\n", "\n    ") + "\n"
	}
	return out
}

// badPool takes any pod, onto the class.
func badPool(class string) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: %s}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`, class)
}

// TestBadInputNamesTheFixAndLaunchesNothing gives one Joiner, with one pod
// waiting for a node, a class that cannot work, one case at a time: a
// selector that matches nothing, a role that does not exist, user data
// that does not parse, and each AWS call of the class's and the launch's
// path refused as by IAM.
// The class's condition (for the calls made at launch, the NodeClaim's)
// must name the field or the permission and the fix, and once the
// provisioner has seen it, nothing has been launched.
func TestBadInputNamesTheFixAndLaunchesNothing(t *testing.T) {
	framework.ResetCluster(t)
	explainBoots(t, fake)
	framework.StartJoiner(t, awsEnv()...)
	// Before Joiner stops: its finalizers must run for the cluster to empty.
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.Deployment("waiting", 1, "1", "1Gi", ""), "apply", "-f", "-")

	// The guides' subnet terms are resolved (and cached) by the cases
	// before, so the case that denies DescribeSubnets has terms of its own.
	ownSubnetTerms := "[{tags: {karpenter.sh/discovery: " + clusterName + ", kubernetes.io/cluster/" + clusterName + ": owned}}]"
	ownSecurityGroupTerms := "[{tags: {karpenter.sh/discovery: " + clusterName + "}}, {name: denied-case}]"
	cases := []struct {
		name   string
		class  badClass
		denied string // a service:Action refused as by IAM
		// condition is the EC2NodeClass condition that goes False with
		// reason; empty for a problem found at launch, which the
		// NodeClaim's Launched condition reports.
		condition, reason string
		// want are fragments of the message: what is wrong and the fix.
		want []string
	}{{
		name:      "subnet selector matches nothing",
		class:     badClass{subnetTerms: "[{tags: {karpenter.sh/discovery: nobody}}]"},
		condition: awsv1.ConditionTypeSubnetsReady, reason: "SubnetsNotFound",
		want: []string{"subnetSelectorTerms[0] {tags: karpenter.sh/discovery=nobody} matched nothing", "or fix the terms"},
	}, {
		name:      "security group selector matches nothing",
		class:     badClass{securityGroupTerms: "[{name: no-such-group}]"},
		condition: awsv1.ConditionTypeSecurityGroupsReady, reason: "SecurityGroupsNotFound",
		want: []string{"securityGroupSelectorTerms[0] {name: no-such-group} matched nothing", "or fix the terms"},
	}, {
		name:      "AMI selector matches nothing",
		class:     badClass{amiFamily: "AL2023", amiTerms: "[{name: no-such-image-*}]"},
		condition: awsv1.ConditionTypeAMIsReady, reason: "AMINotFound",
		want: []string{`amiSelectorTerms[0] (owner "self,amazon" (the default with a name), name "no-such-image-*")`, "or fix the terms"},
	}, {
		name:      "role does not exist",
		class:     badClass{role: "NoSuchRole"},
		condition: awsv1.ConditionTypeInstanceProfileReady, reason: "RoleNotFound",
		want: []string{`spec.role: "NoSuchRole" does not exist`, "create the role"},
	}, {
		name:      "user data is not MIME",
		class:     badClass{userData: "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n--x\nContent-Type: text/x-shellscript\n\necho hi\n--x--"},
		condition: awsv1.ConditionTypeValidationSucceeded, reason: "ValidationFailed",
		want: []string{"spec.userData: not a valid MIME multi-part archive", "names no boundary"},
	}, {
		name:      "user data is not TOML for Bottlerocket",
		class:     badClass{amiTerms: "[{alias: bottlerocket@latest}]", userData: "[settings.kubernetes\nmax-pods = 3"},
		condition: awsv1.ConditionTypeValidationSucceeded, reason: "ValidationFailed",
		want: []string{"spec.userData: not valid TOML for Bottlerocket at line 1"},
	}, {
		name: "ec2:DescribeSubnets denied", denied: "ec2:DescribeSubnets", class: badClass{subnetTerms: ownSubnetTerms},
		condition: awsv1.ConditionTypeSubnetsReady, reason: "UnauthorizedOperation",
		want: []string{"allow ec2:DescribeSubnets in the IAM policy"},
	}, {
		name: "ec2:DescribeSecurityGroups denied", denied: "ec2:DescribeSecurityGroups", class: badClass{securityGroupTerms: ownSecurityGroupTerms},
		condition: awsv1.ConditionTypeSecurityGroupsReady, reason: "UnauthorizedOperation",
		want: []string{"allow ec2:DescribeSecurityGroups in the IAM policy"},
	}, {
		name: "ec2:DescribeImages denied", denied: "ec2:DescribeImages",
		condition: awsv1.ConditionTypeAMIsReady, reason: "UnauthorizedOperation",
		want: []string{"allow ec2:DescribeImages in the IAM policy"},
	}, {
		name: "ssm:GetParameter denied", denied: "ssm:GetParameter",
		condition: awsv1.ConditionTypeAMIsReady, reason: "AccessDeniedException",
		want: []string{"allow ssm:GetParameter in the IAM policy"},
	}, {
		name: "iam:CreateInstanceProfile denied", denied: "iam:CreateInstanceProfile",
		condition: awsv1.ConditionTypeInstanceProfileReady, reason: "AccessDenied",
		want: []string{"allow iam:CreateInstanceProfile in the IAM policy"},
	}, {
		name: "iam:GetInstanceProfile denied", denied: "iam:GetInstanceProfile",
		condition: awsv1.ConditionTypeInstanceProfileReady, reason: "AccessDenied",
		want: []string{"allow iam:GetInstanceProfile in the IAM policy"},
	}, {
		name: "iam:AddRoleToInstanceProfile denied", denied: "iam:AddRoleToInstanceProfile",
		condition: awsv1.ConditionTypeInstanceProfileReady, reason: "AccessDenied",
		want: []string{"allow iam:AddRoleToInstanceProfile in the IAM policy"},
	}, {
		name: "ec2:CreateLaunchTemplate denied", denied: "ec2:CreateLaunchTemplate",
		want: []string{"allow ec2:CreateLaunchTemplate in the IAM policy"},
	}, {
		name: "ec2:CreateFleet denied", denied: "ec2:CreateFleet",
		want: []string{"allow ec2:CreateFleet in the IAM policy"},
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := fmt.Sprintf("bad-%d", i)
			faults := fakeaws.Faults{}
			if tc.denied != "" {
				faults.AccessDenied = []string{tc.denied}
			}
			if err := fake.SetFaults(faults); err != nil {
				t.Fatal(err)
			}
			fake.ResetCalls()
			t.Cleanup(func() { cleanBadCase(t, class) })
			framework.Kubectl(t, tc.class.manifest(class), "apply", "-f", "-")

			if tc.condition != "" {
				msg := waitClassCondition(t, class, tc.condition, tc.reason)
				wantFragments(t, msg, tc.want)
				// The pool comes after the verdict, so the batch its
				// creation starts sees it; a new pod has a fresh event
				// budget, so its FailedScheduling event is not dropped.
				framework.Kubectl(t, badPool(class), "apply", "-f", "-")
				replacePods(t, "waiting")
				waitNotReadyEvent(t, class)
				framework.WantClaims(t, 0)
				if n := len(fake.Calls("ec2", "CreateFleet")); n > 0 {
					t.Fatalf("%d CreateFleet calls for a class that is not ready", n)
				}
				return
			}
			waitClassCondition(t, class, awsv1.ConditionTypeReady, awsv1.ConditionTypeReady)
			framework.Kubectl(t, badPool(class), "apply", "-f", "-")
			msg := waitLaunchFailed(t)
			wantFragments(t, msg, tc.want)
			for _, c := range fake.Calls("ec2", "CreateFleet") {
				if len(c.Instances) > 0 || c.Fault == "" {
					t.Fatalf("CreateFleet launched %v (status %d) although %s is denied", c.Instances, c.Status, tc.denied)
				}
			}
			if tc.denied != "ec2:CreateFleet" {
				if n := len(fake.Calls("ec2", "CreateFleet")); n > 0 {
					t.Fatalf("%d CreateFleet calls without a launch template", n)
				}
			}
		})
	}
}

// waitClassCondition waits for the class's condition to have reason (False,
// or True when the reason is the type's name) for its generation, and
// returns its message.
func waitClassCondition(t testing.TB, name, condition, reason string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("EC2NodeClass %s %s reason %s", name, condition, reason), func() (bool, string) {
		nc := &awsv1.EC2NodeClass{}
		if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: name}, nc); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, condition)
		if c == nil {
			return false, fmt.Sprintf("no %s condition: %v", condition, nc.Status.Conditions)
		}
		want := metav1.ConditionFalse
		if reason == condition {
			want = metav1.ConditionTrue
		}
		msg = c.Message
		return c.Status == want && c.Reason == reason && c.ObservedGeneration == nc.Generation,
			fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
	})
	return msg
}

func wantFragments(t testing.TB, msg string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the message does not say %q: %s", w, msg)
		}
	}
	t.Logf("message: %s", msg)
}

// replacePods deletes the deployment's pods; it makes new ones, which
// start a provisioning batch.
func replacePods(t testing.TB, app string) {
	t.Helper()
	if err := framework.Kube.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace("default"),
		client.MatchingLabels{"app": app}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// waitNotReadyEvent waits for the provisioner to tell a pod that no pool
// could take it because the class is not ready: the sign that it has seen
// the class's verdict and would have launched if it could.
func waitNotReadyEvent(t testing.TB, class string) {
	t.Helper()
	text := fmt.Sprintf("EC2NodeClass %q is not ready", class)
	framework.Eventually(t, 30*time.Second, "a FailedScheduling event saying "+text, func() (bool, string) {
		var events corev1.EventList
		if err := framework.Kube.List(context.Background(), &events, client.InNamespace("default"), client.MatchingFields{"reason": "FailedScheduling"}); err != nil {
			return false, err.Error()
		}
		var last string
		for _, e := range events.Items {
			if strings.Contains(e.Message, text) {
				return true, ""
			}
			last = e.Message
		}
		return false, last
	})
}

// waitLaunchFailed waits for a NodeClaim whose launch failed, and returns
// the Launched condition's message.
func waitLaunchFailed(t testing.TB) string {
	t.Helper()
	var msg string
	framework.Eventually(t, 2*time.Minute, "a NodeClaim with Launched reason LaunchFailed", func() (bool, string) {
		claims := framework.NodeClaims(t)
		for _, nc := range claims {
			if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched); c != nil && c.Reason == "LaunchFailed" {
				msg = c.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d NodeClaims", len(claims))
	})
	return msg
}

// cleanBadCase removes a case's pool, NodeClaims and class, in that order:
// no new NodeClaim is made once the pool is gone, and the faults stay until
// the NodeClaims are, so none launches meanwhile. The class goes last, with
// the faults cleared, so its instance profile can be removed.
func cleanBadCase(t testing.TB, class string) {
	ctx := context.Background()
	framework.Kubectl(t, "", "delete", "nodepool", "bad", "--ignore-not-found")
	_ = framework.Kube.DeleteAllOf(ctx, &v1.NodeClaim{})
	framework.Eventually(t, time.Minute, "the case's NodeClaims to go", func() (bool, string) {
		n := len(framework.NodeClaims(t))
		return n == 0, fmt.Sprintf("%d NodeClaims", n)
	})
	if err := fake.SetFaults(fakeaws.Faults{}); err != nil {
		t.Fatal(err)
	}
	framework.Kubectl(t, "", "delete", "ec2nodeclass", class, "--ignore-not-found")
}
