package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// controllerRole is the controller's role in the guides.
const controllerRole = "demo-karpenter"

var sixPolicies = []string{"NodeLifecyclePolicy", "IAMIntegrationPolicy", "EKSIntegrationPolicy", "InterruptionPolicy", "ResourceDiscoveryPolicy", "ZonalShiftPolicy"}

// joinerStack is Joiner's own stack.
const joinerStack = "deploy/cloudformation/joiner.yaml"

// TestGuideUnderPublishedPolicies walks guide 03 through, as a user who
// installed Karpenter by the guide and switched to Joiner would, under each
// stack: Karpenter's v1.1.3 and v1.14, deployed with the guide's command,
// and Joiner's own. AWS enforces IAM (fake-aws --iam-enforce, conditions
// included); the controller authenticates with IRSA (a web identity token
// for the role the stack's policies are attached to) and talks to
// Kubernetes as the chart's service account (a token of it), with the
// chart's RBAC. Spot
// nodes come up, one is interrupted through the stack's EventBridge rule
// and drained, and the deployment scales down; no call is refused, by AWS
// or by the apiserver. Under Joiner's own stack, each Allow statement is
// shown needed; and the audit log shows each rule of the chart's RBAC used.
// atListPrices is the line that says, once, that Joiner plans without the
// account's commitments: Karpenter's stacks grant none of their reads.
const atListPrices = "planning at list prices without the account's commitments"

func TestGuideUnderPublishedPolicies(t *testing.T) {
	stacks := []struct {
		name, template string
		policies       []string
		// how the controller gets its role: the v1.1.3 guide's IRSA, or
		// the v1.14 guide's Pod Identity with zonal shift on.
		how access
		// leastPrivilege: every Allow statement of the stack's policies
		// is needed by some call of the run.
		leastPrivilege bool
		// optional are the calls the stack may refuse, and the log line
		// that says, once, what is off then: v1.1.3 grants neither the
		// status checks nor the listing of instance profiles, and Joiner
		// then turns the status checks and the profiles' collection off;
		// neither of Karpenter's grants the commitments' reads, and Joiner
		// plans at list prices.
		optional map[string]string
	}{
		{"karpenter v1.1.3", "test/testdata/karpenter-stacks/cloudformation-v1.1.3.yaml", []string{"KarpenterControllerPolicy"}, irsa, false,
			map[string]string{"ec2:DescribeInstanceStatus": "instance status checks are off", "iam:ListInstanceProfiles": "unused instance profiles are not collected",
				"ec2:DescribeReservedInstances": atListPrices, "savingsplans:DescribeSavingsPlans": atListPrices}},
		{"karpenter v1.14", "test/testdata/karpenter-stacks/cloudformation-v1.14.yaml", sixPolicies, guideV114, false,
			map[string]string{"ec2:DescribeReservedInstances": atListPrices, "savingsplans:DescribeSavingsPlans": atListPrices}},
		{"joiner", joinerStack, sixPolicies, guideV114, true, nil},
	}
	asServiceAccount := chartRBAC(t)
	defer func() {
		if !t.Failed() {
			everyRBACRuleUsed(t)
		}
	}()
	for _, stack := range stacks {
		t.Run(stack.name, func(t *testing.T) {
			framework.ResetCluster(t)
			f, role := underStack(t, stack.template, stack.policies, stack.how)
			adminIAM := iam.NewFromConfig(adminConfig(t, f))
			j := startController(t, f, role, asServiceAccount, stack.how)
			t.Cleanup(func() { framework.ResetCluster(t) })

			manifest := walkthroughManifest(t)
			framework.Kubectl(t, manifest, "apply", "-f", "-")
			framework.Eventually(t, 3*time.Minute, "five inflate pods run on spot", func() (bool, string) {
				n, _ := framework.Running(t, map[string]string{"app": "inflate"})
				return n == 5, fmt.Sprintf("%d running", n)
			})
			claims := framework.NodeClaims(t)
			first := claims[0]
			id := instanceID(first.Status.ProviderID)
			if stack.how.zonalShift {
				zonalShiftAwayFrom(t, f, first)
			}
			if stack.how.podIdentity {
				noCredentialsForOthers(t, f)
			} else {
				noWebIdentityForOthers(t, f)
			}

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

			// Deleting the classes deletes their launch templates and
			// instance profiles.
			framework.ResetCluster(t)
			framework.Eventually(t, time.Minute, "the classes' instance profiles are deleted", func() (bool, string) {
				out, err := adminIAM.ListInstanceProfiles(context.Background(), &iam.ListInstanceProfilesInput{})
				if err != nil {
					return false, err.Error()
				}
				return len(out.InstanceProfiles) == 0, fmt.Sprintf("%d profiles", len(out.InstanceProfiles))
			})

			// Every call the controller made was its role's session's, and
			// none was refused.
			var fleets, statusCalls, othersRefused int
			optionalRefused := map[string]int{}
			for _, c := range f.Calls("", "") {
				if !stack.how.podIdentity && c.Fault == "iamDenied" && c.Service+":"+c.Action == "sts:AssumeRoleWithWebIdentity" {
					othersRefused++ // noWebIdentityForOthers' tokens
					continue
				}
				if c.Service == "ec2" && c.Action == "DescribeInstanceStatus" {
					statusCalls++
				}
				if _, ok := stack.optional[c.Service+":"+c.Action]; ok && c.Fault == "iamDenied" {
					optionalRefused[c.Service+":"+c.Action]++
					continue
				}
				if c.Fault == "iamDenied" {
					t.Errorf("refused: %s:%s by %s (%s)", c.Service, c.Action, c.Principal, c.ErrorCode)
				}
				if unmodelled(c) {
					t.Errorf("the endpoint could not answer %s:%s (%d %s: %s): the run is not judged on it", c.Service, c.Action, c.Status, c.ErrorCode, c.ErrorMessage)
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
			if !stack.how.podIdentity && othersRefused != 2 {
				t.Errorf("%d web identity refusals, want the 2 of the tokens that are not the chart's", othersRefused)
			}
			if statusCalls == 0 {
				t.Error("no DescribeInstanceStatus call in the log: the status checks did not run")
			}
			for action, off := range stack.optional {
				// Refused at start and said so once. The status checks are
				// then left alone for 15 minutes, the collection for 30
				// (a class's deletion still tries the listing, quietly).
				if n := optionalRefused[action]; n == 0 || (action == "ec2:DescribeInstanceStatus" && n != 1) {
					t.Errorf("%s refused %d times, want once (the status checks) or at least once", action, n)
				}
				if n := strings.Count(j.Logs(), off); n != 1 {
					t.Errorf("the log says %d times %q, want once", n, off)
				}
			}
			if stack.leastPrivilege {
				everyStatementNeeded(t, f)
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

// underStack deploys the stack into an endpoint of its own that enforces
// IAM, with the guide's command, and makes what a guide's cluster has
// besides: the controller's IRSA role with the stack's policies attached,
// and the instance profile of a second class, legacy, as an older
// controller left it (without eks:eks-cluster-name, which Joiner adds,
// retagging under the policy's conditions). It returns the role's ARN.
func underStack(t *testing.T, template string, policies []string, how access) (*fakeaws.Server, string) {
	t.Helper()
	f := enforcingFake(t)
	deployStack(t, f, filepath.Join(framework.Cluster.Root, template))
	adminIAM := iam.NewFromConfig(adminConfig(t, f))
	ctx := context.Background()
	trust := irsaTrust(t, f)
	if how.podIdentity {
		trust = podIdentityTrust
	}
	role, err := adminIAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(controllerRole), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatal(err)
	}
	if how.podIdentity {
		// The guide's eksctl podIdentityAssociations, as awscli makes it.
		awsCLI(t, f, "eks", "create-pod-identity-association", "--cluster-name", clusterName, "--namespace", "kube-system",
			"--service-account", "karpenter", "--role-arn", aws.ToString(role.Role.Arn))
	}
	for _, p := range policies {
		if _, err := adminIAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(controllerRole), PolicyArn: aws.String(policyARN(p))}); err != nil {
			t.Fatalf("attaching %s: %v", p, err)
		}
	}
	if _, err := adminIAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(instanceprofile.Name(clusterName, region, "legacy", "KarpenterNodeRole-"+clusterName)), Tags: []iamtypes.Tag{
		{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned")}, {Key: aws.String("topology.kubernetes.io/region"), Value: aws.String(region)},
		{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("legacy")}}}); err != nil {
		t.Fatal(err)
	}
	explainBoots(t, f)
	explainCalls(t, f)
	return f, aws.ToString(role.Role.Arn)
}

// policyARN is the ARN of a stack's policy, by its logical ID's name:
// KarpenterController<name>-<cluster>, or KarpenterControllerPolicy-<cluster>
// (v1.1.3's one policy).
func policyARN(name string) string {
	if name == "KarpenterControllerPolicy" {
		return "arn:aws:iam::123456789012:policy/KarpenterControllerPolicy-" + clusterName
	}
	return fmt.Sprintf("arn:aws:iam::123456789012:policy/KarpenterController%s-%s", name, clusterName)
}

// adminConfig is the SDK configuration of f's administrator.
func adminConfig(t *testing.T, f *fakeaws.Server) aws.Config {
	t.Helper()
	admin := f.AdminCredentials()
	cfg := clientConfig(t, f.URL(), region)
	cfg.Credentials = credentials.NewStaticCredentialsProvider(admin.AccessKeyID, admin.SecretAccessKey, "")
	return cfg
}

// startController runs Joiner as the chart does on EKS, with the settings
// the chart renders from the guide's helm flags (chartEnv), the chart's
// service account (kubeconfig) and leader election on. Its AWS credentials
// come the way the SDK's default chain finds them in the pod: IRSA's web
// identity token for role (the SDK resolves it before its base endpoint,
// so STS takes its own standard variable), or the EKS Pod Identity agent's
// two variables. extra settings come after the chart's, and win.
func startController(t *testing.T, f *fakeaws.Server, role, kubeconfig string, how access, extra ...string) *framework.Joiner {
	t.Helper()
	env := append(chartEnv(t, how),
		"CLOUD_PROVIDER=aws", "AWS_REGION="+region,
		"AWS_ENDPOINT_URL="+f.URL(), "AWS_ENDPOINT_URL_STS="+f.URL(), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_EC2_METADATA_DISABLED=true",
		"KUBECONFIG="+kubeconfig, "DISABLE_LEADER_ELECTION=false", "SYSTEM_NAMESPACE=kube-system",
		"LEADER_ELECTION_NAME=karpenter-leader-election", "DISRUPTION_POLL=2s", "INSTANCE_PROFILE_GC_INTERVAL=5s")
	if how.podIdentity {
		token := serviceAccountToken(t, "pods.eks.amazonaws.com")
		env = append(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI="+f.URL()+fakeaws.PodIdentityPath, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="+token)
	} else {
		token := serviceAccountToken(t, "sts.amazonaws.com")
		env = append(env, "AWS_ROLE_ARN="+role, "AWS_WEB_IDENTITY_TOKEN_FILE="+token)
	}
	return framework.StartJoiner(t, append(env, extra...)...)
}

// walkthroughManifest is guide 03 on spot with a 5s consolidateAfter, and
// the second class, legacy.
func walkthroughManifest(t *testing.T) string {
	t.Helper()
	manifest := strings.Replace(framework.ReadSeed(t, "03-scale-up-down.yaml"), `values: ["on-demand"]`, `values: ["spot"]`, 1)
	manifest = strings.Replace(manifest, "consolidateAfter: 1m", "consolidateAfter: 5s", 1)
	return manifest + "\n---\n" + legacyClass(t, manifest)
}

// legacyClass is the manifest's EC2NodeClass, named legacy.
func legacyClass(t *testing.T, manifest string) string {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		if slices.Contains(strings.Split(doc, "\n"), "kind: EC2NodeClass") {
			return strings.Replace(doc, "name: default", "name: legacy", 1)
		}
	}
	t.Fatal("the manifest has no EC2NodeClass")
	return ""
}

// everyStatementNeeded takes each Allow statement out of the controller
// role's policies in turn and asks the evaluator again about every
// authorization the run needed: some must now be refused, or the statement
// grants what Joiner never uses (statementNeeds).
func everyStatementNeeded(t *testing.T, f *fakeaws.Server) {
	t.Helper()
	for _, n := range statementNeeds(t, f) {
		t.Logf("%s statement %s: without it %s would be refused", n.policy, n.sid, strings.Join(n.actions, ", "))
	}
}

// unmodelled reports a call the local endpoint answered with a server
// error of its own (no fault was injected): the authorization could not be
// modelled, or moto failed it. Such a call says nothing of the policy, so
// a run under enforcement with one has not shown that the policy suffices.
func unmodelled(c fakeaws.Call) bool {
	return c.Fault == "iamError" || (c.Fault == "" && c.Status >= 500)
}

// neededElsewhere are the statements of Joiner's stack that the guide's
// walkthrough does not need, and the scenario that does.
var neededElsewhere = map[string]string{
	// A class whose profile holds another role (spec.role changed) has
	// the new role checked before the old one leaves the profile.
	"CheckNodeRole": "a class's spec.role change (TestOwnFeaturesUnderOwnStack)",
}

// need is what one statement was needed for in a run: the actions that
// would be refused without it.
type need struct {
	policy, sid string
	actions     []string
}

// statementNeeds asks the evaluator, for each Allow statement of the
// controller role's policies, which authorizations of the run it alone
// granted; a statement no authorization needed is an error.
func statementNeeds(t *testing.T, f *fakeaws.Server) []need {
	t.Helper()
	ctx := context.Background()
	policies, err := f.RolePolicies(ctx, controllerRole)
	if err != nil {
		t.Fatal(err)
	}
	authorizations := f.Authorizations()
	var out []need
	for i, p := range policies {
		doc, _ := p.Policy.(map[string]any)
		statements, _ := doc["Statement"].([]any)
		for j, st := range statements {
			m, _ := st.(map[string]any)
			if m["Effect"] != "Allow" {
				continue
			}
			others := slices.Clone(policies)
			others[i] = fakeaws.PolicyDocument{Name: p.Name, Policy: map[string]any{"Version": doc["Version"], "Statement": slices.Delete(slices.Clone(statements), j, j+1)}}
			n := need{policy: p.Name, sid: fmt.Sprint(m["Sid"])}
			for _, a := range authorizations {
				result, err := f.Evaluate(ctx, others, a)
				if err != nil {
					t.Fatal(err)
				}
				if result != "Allowed" && result != "NotApplicable" && !slices.Contains(n.actions, a.Action) {
					n.actions = append(n.actions, a.Action)
				}
			}
			if len(n.actions) == 0 {
				if why, ok := neededElsewhere[n.sid]; ok {
					t.Logf("%s statement %s: not needed by this run; it stays for %s", n.policy, n.sid, why)
					continue
				}
				t.Errorf("%s statement %s: no call of the run needs it; remove it or say why it stays", n.policy, n.sid)
				continue
			}
			out = append(out, n)
		}
	}
	return out
}

// enforcingFake is a local AWS endpoint of its own that enforces IAM, for
// one test.
func enforcingFake(t *testing.T) *fakeaws.Server { return startFake(t, true) }

// startFake starts an endpoint of the test's own (enforcing IAM or not),
// for state the package's shared endpoint must not keep: a stack's roles,
// an account's commitments.
func startFake(t *testing.T, enforce bool) *fakeaws.Server {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "aws-calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := fakeaws.Options{ClusterName: clusterName, Region: region, Kubeconfig: framework.Cluster.Kubeconfig, CallLog: logFile}
	if enforce {
		opts.IAMEnforce, opts.IAMSimulateModules = true, framework.Cluster.Bins.IAMSim
	}
	f, err := fakeaws.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// awsCLI runs the AWS CLI, the second client of the endpoint, as the
// administrator where the endpoint enforces IAM.
func awsCLI(t *testing.T, f *fakeaws.Server, args ...string) string {
	t.Helper()
	admin := f.AdminCredentials()
	if admin.AccessKeyID == "" {
		// An endpoint that enforces no IAM takes any key.
		admin.AccessKeyID, admin.SecretAccessKey = "test", "test"
	}
	cmd := exec.Command("aws", append([]string{"--endpoint-url", f.URL(), "--region", region}, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+admin.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+admin.SecretAccessKey,
		"AWS_ENDPOINT_URL="+f.URL(), "AWS_DEFAULT_REGION="+region, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// awsCLIJSON runs the AWS CLI with JSON output and decodes it into into;
// it returns the output, for failure messages.
func awsCLIJSON(t *testing.T, f *fakeaws.Server, into any, args ...string) string {
	t.Helper()
	out := awsCLI(t, f, append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
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
	return instanceStates(t, ec2.NewFromConfig(adminConfig(t, f)))
}

// explainCalls prints, when the test fails, f's calls that failed, with
// who made them.
func explainCalls(t *testing.T, f *fakeaws.Server) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, c := range f.Calls("", "") {
			if c.Status >= 400 {
				t.Logf("call %s:%s by %s: %d %s %s %s", c.Service, c.Action, c.Principal, c.Status, c.ErrorCode, c.Fault, c.ErrorMessage)
			}
		}
	})
}

// rbacKept are the chart's rule verbs a guide walkthrough does not use,
// each with why it stays; the chart says the same beside the rule.
var rbacKept = map[string]string{
	"pods delete":  "a drain deletes a pod whose eviction outlasts the NodeClaim's terminationGracePeriod",
	"events patch": "the event recorder patches an event that repeats instead of creating another",
}

// errorCode is an AWS error's code, or "" for nil or another error.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
