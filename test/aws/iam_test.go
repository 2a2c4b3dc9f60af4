package aws

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/client-go/tools/clientcmd"
)

// controllerRole is the IRSA role of the guides: trusted by the cluster's
// OIDC provider for the chart's service account.
const (
	controllerRole = "demo-karpenter"
	controllerSA   = "system:serviceaccount:kube-system:karpenter"
	irsaTrust      = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/DEMO"},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"oidc.eks.us-east-1.amazonaws.com/id/DEMO:sub":"system:serviceaccount:kube-system:karpenter","oidc.eks.us-east-1.amazonaws.com/id/DEMO:aud":"sts.amazonaws.com"}}}]}`
)

var sixPolicies = []string{"NodeLifecyclePolicy", "IAMIntegrationPolicy", "EKSIntegrationPolicy", "InterruptionPolicy", "ResourceDiscoveryPolicy", "ZonalShiftPolicy"}

// TestGuideUnderPublishedPolicies walks guide 03 through, as a user who
// installed Karpenter by the guide and switched to Joiner would, under each
// stack: Karpenter's v1.1.3 and v1.14, deployed with the guide's command,
// and Joiner's own. AWS enforces IAM (fake-aws --iam-enforce, conditions
// included); the controller authenticates with IRSA (a web identity token
// for the role the stack's policies are attached to) and talks to
// Kubernetes as the chart's service account, with the chart's RBAC. Spot
// nodes come up, one is interrupted through the stack's EventBridge rule
// and drained, and the deployment scales down; no call is refused, by AWS
// or by the apiserver.
func TestGuideUnderPublishedPolicies(t *testing.T) {
	stacks := []struct {
		name, template string
		policies       []string
	}{
		{"karpenter v1.1.3", "test/testdata/karpenter-stacks/cloudformation-v1.1.3.yaml", []string{"KarpenterControllerPolicy"}},
		{"karpenter v1.14", "test/testdata/karpenter-stacks/cloudformation-v1.14.yaml", sixPolicies},
		{"joiner", "deploy/cloudformation/joiner.yaml", sixPolicies},
	}
	impersonating := chartRBAC(t)
	for _, stack := range stacks {
		t.Run(stack.name, func(t *testing.T) {
			framework.ResetCluster(t)
			f := enforcingFake(t)
			admin := f.AdminCredentials()
			deployStack(t, f, filepath.Join(framework.Cluster.Root, stack.template))
			adminCfg := clientConfig(t, f.URL(), region)
			adminCfg.Credentials = credentials.NewStaticCredentialsProvider(admin.AccessKeyID, admin.SecretAccessKey, "")
			adminIAM := iam.NewFromConfig(adminCfg)
			role, err := adminIAM.CreateRole(context.Background(), &iam.CreateRoleInput{RoleName: aws.String(controllerRole), AssumeRolePolicyDocument: aws.String(irsaTrust)})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range stack.policies {
				arn := fmt.Sprintf("arn:aws:iam::123456789012:policy/KarpenterController%s-%s", strings.TrimPrefix(p, "KarpenterController"), clusterName)
				if p == "KarpenterControllerPolicy" {
					arn = "arn:aws:iam::123456789012:policy/KarpenterControllerPolicy-" + clusterName
				}
				if _, err := adminIAM.AttachRolePolicy(context.Background(), &iam.AttachRolePolicyInput{RoleName: aws.String(controllerRole), PolicyArn: aws.String(arn)}); err != nil {
					t.Fatalf("attaching %s: %v", arn, err)
				}
			}
			token := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(token, []byte("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW06a2FycGVudGVyIn0.sig"), 0o600); err != nil {
				t.Fatal(err)
			}
			explainFakeBoots(t, f)
			j := framework.StartJoiner(t,
				"CLOUD_PROVIDER=aws", "CLUSTER_NAME="+clusterName, "AWS_REGION="+region, "INTERRUPTION_QUEUE="+clusterName,
				// IRSA: the SDK resolves the web identity credentials before its base
				// endpoint, so STS takes its own standard variable.
				"AWS_ENDPOINT_URL="+f.URL(), "AWS_ENDPOINT_URL_STS="+f.URL(), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_EC2_METADATA_DISABLED=true",
				"AWS_ROLE_ARN="+aws.ToString(role.Role.Arn), "AWS_WEB_IDENTITY_TOKEN_FILE="+token,
				"KUBECONFIG="+impersonating, "DISABLE_LEADER_ELECTION=false", "SYSTEM_NAMESPACE=kube-system",
				"LEADER_ELECTION_NAME=karpenter-leader-election", "DISRUPTION_POLL=2s")
			t.Cleanup(func() { framework.ResetCluster(t) })

			manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), `values: ["on-demand"]`, `values: ["spot"]`, 1)
			manifest = strings.Replace(manifest, "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
			framework.Kubectl(t, manifest, "apply", "-f", "-")
			framework.Eventually(t, 3*time.Minute, "five inflate pods run on spot", func() (bool, string) {
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				return n == 5, fmt.Sprintf("%d running", n)
			})
			claims := framework.NodeClaims(t)
			first := claims[0]
			id := instanceID(first.Status.ProviderID)

			// EC2's warning, sent the way AWS sends it: an event on the
			// default bus, which the stack's rule puts on the queue.
			putEvent(t, f, "EC2 Spot Instance Interruption Warning", fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, id),
				fmt.Sprintf("arn:aws:ec2:%s:123456789012:instance/%s", region, id))
			framework.Eventually(t, 3*time.Minute, "the interrupted node is drained and replaced", func() (bool, string) {
				claims := framework.NodeClaims(t)
				for _, c := range claims {
					if c.Name == first.Name {
						return false, "the interrupted NodeClaim is still there"
					}
				}
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				return n == 5, fmt.Sprintf("%d running on %d NodeClaims", n, len(claims))
			})
			framework.Eventually(t, 2*time.Minute, "the interrupted instance is terminated", func() (bool, string) {
				state := fakeInstances(t, f)[id]
				return state == "terminated", "state " + state
			})

			framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "1")
			framework.Eventually(t, 4*time.Minute, "the pool scales down to one node", func() (bool, string) {
				claims := framework.NodeClaims(t)
				running := 0
				for _, state := range fakeInstances(t, f) {
					if state == "running" || state == "pending" {
						running++
					}
				}
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				return len(claims) == 1 && running == 1 && n == 1, fmt.Sprintf("%d NodeClaims, %d instances running, %d pods", len(claims), running, n)
			})

			// Every call the controller made was its role's session's, and
			// none was refused.
			var fleets int
			for _, c := range f.Calls("", "") {
				if c.Fault == "iamDenied" {
					t.Errorf("refused: %s:%s by %s (%s)", c.Service, c.Action, c.Principal, c.ErrorCode)
				}
				if c.Service == "ec2" && c.Action == "CreateFleet" {
					fleets++
					if !strings.Contains(c.Principal, ":assumed-role/"+controllerRole+"/") {
						t.Errorf("CreateFleet signed by %q, want the IRSA role's session", c.Principal)
					}
				}
			}
			if fleets == 0 {
				t.Error("no CreateFleet call in the log")
			}
			for _, line := range strings.Split(j.Logs(), "\n") {
				for _, bad := range []string{"AccessDenied", "UnauthorizedOperation", "is forbidden", "not authorized"} {
					if strings.Contains(line, bad) {
						t.Errorf("the controller's log shows %q: %s", bad, line)
					}
				}
			}
		})
	}
}

// enforcingFake is a local AWS endpoint of its own that enforces IAM, for
// one test.
func enforcingFake(t *testing.T) *fakeaws.Server {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "aws-calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: clusterName, Region: region, Kubeconfig: framework.Cluster.Kubeconfig,
		CallLog: logFile, IAMEnforce: true, IAMSimulateModules: framework.Cluster.Bins.IAMSim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// awsCLI runs the AWS CLI, the second client of the endpoint, as the
// administrator.
func awsCLI(t *testing.T, f *fakeaws.Server, args ...string) string {
	t.Helper()
	admin := f.AdminCredentials()
	cmd := exec.Command("aws", append([]string{"--endpoint-url", f.URL(), "--region", region}, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+admin.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+admin.SecretAccessKey,
		"AWS_ENDPOINT_URL="+f.URL(), "AWS_DEFAULT_REGION="+region, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// deployStack is the guide's command.
func deployStack(t *testing.T, f *fakeaws.Server, template string) {
	t.Helper()
	awsCLI(t, f, "cloudformation", "deploy", "--stack-name", "Karpenter-"+clusterName, "--template-file", template,
		"--capabilities", "CAPABILITY_NAMED_IAM", "--parameter-overrides", "ClusterName="+clusterName)
}

func putEvent(t *testing.T, f *fakeaws.Server, detailType, detail, resource string) {
	t.Helper()
	entry := fmt.Sprintf(`[{"Source":"aws.ec2","DetailType":%q,"Detail":%q,"Resources":[%q]}]`, detailType, detail, resource)
	if out := awsCLI(t, f, "events", "put-events", "--entries", entry, "--output", "text"); !strings.HasPrefix(out, "0") {
		t.Fatalf("put-events: %s", out)
	}
}

// fakeInstances lists f's instances by state, as the administrator.
func fakeInstances(t *testing.T, f *fakeaws.Server) map[string]string {
	t.Helper()
	admin := f.AdminCredentials()
	cfg := clientConfig(t, f.URL(), region)
	cfg.Credentials = credentials.NewStaticCredentialsProvider(admin.AccessKeyID, admin.SecretAccessKey, "")
	out := map[string]string{}
	pager := ec2.NewDescribeInstancesPaginator(ec2.NewFromConfig(cfg), &ec2.DescribeInstancesInput{})
	for pager.HasMorePages() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = string(i.State.Name)
			}
		}
	}
	return out
}

func explainFakeBoots(t *testing.T, f *fakeaws.Server) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, b := range f.Boots() {
			t.Logf("instance %s (%s): state %s, node %q, joined %v, reason %q", b.InstanceID, b.InstanceType, b.State, b.Node, b.Joined, b.Reason)
		}
		for _, c := range f.Calls("", "") {
			if c.Status >= 400 {
				t.Logf("call %s:%s by %s: %d %s %s", c.Service, c.Action, c.Principal, c.Status, c.ErrorCode, c.Fault)
			}
		}
	})
}

// chartRBAC installs the chart's RBAC for the release the guides name
// (karpenter, in kube-system: the service account karpenter), without its
// controller (replicas 0: the test runs it), and returns a kubeconfig that
// acts as that service account.
func chartRBAC(t *testing.T) string {
	t.Helper()
	helm := func(args ...string) {
		cmd := exec.Command(framework.Cluster.Bins.Helm, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Cluster.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	helm("upgrade", "--install", "karpenter", filepath.Join(framework.Cluster.Root, "charts", "joiner"), "--namespace", "kube-system",
		"--set", "replicas=0", "--set", "settings.clusterName="+clusterName)
	t.Cleanup(func() { helm("uninstall", "karpenter", "--namespace", "kube-system") })
	cfg, err := clientcmd.LoadFromFile(framework.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = controllerSA
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-as-karpenter")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
