//go:build leastprivilege

package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestEachStatementNamedWhenMissing takes each Allow statement out of
// Joiner's stack, one at a time, runs the guide's walkthrough under what is
// left, and expects the controller to name a permission the statement
// granted, "allow <action> in the IAM policy", in its log, an event or a
// condition. A first full run records what each statement is needed for
// (the evaluator, again without it), which says which permissions may be
// named. The walkthrough goes on step by step (up, a spot interruption,
// down, the classes deleted) until one is named, since some statements are
// needed only late. make least-privilege; about 8 minutes.
func TestEachStatementNamedWhenMissing(t *testing.T) {
	kubeconfig := chartRBAC(t)

	// The first run: every statement, and what the run needed of each.
	framework.ResetCluster(t)
	f, role := underStack(t, joinerStack, sixPolicies, guideV114)
	first := startController(t, f, role, kubeconfig, guideV114)
	framework.Kubectl(t, walkthroughManifest(t), "apply", "-f", "-")
	steps(t, f, func() bool { return false })
	framework.ResetCluster(t)
	needs := statementNeeds(t, f)
	first.Stop(syscall.SIGTERM)
	f.Stop()

	for _, st := range needs {
		t.Run(st.policy+"/"+st.sid, func(t *testing.T) {
			framework.ResetCluster(t)
			f, role := underStack(t, joinerStack, sixPolicies, guideV114)
			without(t, f, st.policy, st.sid)
			j := startController(t, f, role, kubeconfig, guideV114)
			t.Cleanup(func() {
				// Put the statement back, so the controller can empty the
				// cluster.
				restore(t, f, st.policy)
				framework.ResetCluster(t)
			})
			named := ""
			found := func() bool {
				text := j.Logs() + framework.Kubectl(t, "", "get", "events", "-A", "-o", "json") +
					framework.Kubectl(t, "", "get", "ec2nodeclasses,nodeclaims", "-o", "json")
				for _, a := range st.actions {
					if strings.Contains(text, "allow "+a+" in the IAM policy") {
						named = a
						return true
					}
				}
				return false
			}
			framework.Kubectl(t, walkthroughManifest(t), "apply", "-f", "-")
			step := steps(t, f, found)
			if named == "" {
				t.Fatalf("without %s, nothing named any of %v", st.sid, st.actions)
			}
			t.Logf("without %s: %q named at step %q", st.sid, "allow "+named+" in the IAM policy", step)
		})
	}
}

// steps walks guide 03 through until done says so, and returns the step
// it stopped at: up on spot, a spot interruption, down to one pod, the
// classes deleted. A step that does not finish in its time is left for the
// next (a missing permission may stop it).
func steps(t *testing.T, f *fakeaws.Server, done func() bool) string {
	t.Helper()
	wait := func(timeout time.Duration, finished func() bool) bool {
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			if done() {
				return true
			}
			if finished() {
				return false
			}
			time.Sleep(time.Second)
		}
		return done()
	}
	running := func(n int) func() bool {
		return func() bool { got, _ := framework.Running(t, map[string]string{"app": "inflate"}); return got == n }
	}
	if wait(2*time.Minute, running(5)) {
		return "up"
	}
	if claims := framework.NodeClaims(t); len(claims) > 0 && claims[0].Status.ProviderID != "" {
		id := instanceID(claims[0].Status.ProviderID)
		putEvent(t, f, "EC2 Spot Instance Interruption Warning", fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, id),
			fmt.Sprintf("arn:aws:ec2:%s:123456789012:instance/%s", region, id))
		if wait(90*time.Second, func() bool { return fakeInstances(t, f)[id] == "terminated" && running(5)() }) {
			return "interruption"
		}
	}
	framework.Kubectl(t, "", "scale", "deployment/inflate", "--replicas", "1")
	if wait(90*time.Second, func() bool { return len(framework.NodeClaims(t)) == 1 }) {
		return "down"
	}
	framework.Kubectl(t, "", "delete", "deployment", "inflate", "--wait=false")
	framework.Kubectl(t, "", "delete", "nodepools,nodeclaims,ec2nodeclasses", "--all", "--wait=false")
	if wait(90*time.Second, func() bool {
		out, err := iam.NewFromConfig(adminConfig(t, f)).ListInstanceProfiles(context.Background(), &iam.ListInstanceProfilesInput{})
		return err == nil && len(out.InstanceProfiles) == 0
	}) {
		return "classes deleted"
	}
	return "none"
}

// without makes the policy's default version one without the statement;
// a policy left with none is detached from the role instead (IAM refuses a
// policy without statements).
func without(t *testing.T, f *fakeaws.Server, policy, sid string) {
	t.Helper()
	api := iam.NewFromConfig(adminConfig(t, f))
	ctx := context.Background()
	arn := "arn:aws:iam::123456789012:policy/" + policy
	v, err := api.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String(arn), VersionId: aws.String("v1")})
	if err != nil {
		t.Fatal(err)
	}
	text := aws.ToString(v.PolicyVersion.Document)
	if decoded, err := url.QueryUnescape(text); err == nil && strings.HasPrefix(text, "%") {
		text = decoded
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	statements, _ := doc["Statement"].([]any)
	rest := slices.DeleteFunc(slices.Clone(statements), func(s any) bool { return s.(map[string]any)["Sid"] == sid })
	if len(rest) == 0 {
		if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(controllerRole), PolicyArn: aws.String(arn)}); err != nil {
			t.Fatal(err)
		}
		return
	}
	doc["Statement"] = rest
	b, _ := json.Marshal(doc)
	if _, err := api.CreatePolicyVersion(ctx, &iam.CreatePolicyVersionInput{PolicyArn: aws.String(arn), PolicyDocument: aws.String(string(b)), SetAsDefault: true}); err != nil {
		t.Fatal(err)
	}
}

// restore makes the stack's own version the default again, attached.
func restore(t *testing.T, f *fakeaws.Server, policy string) {
	t.Helper()
	api := iam.NewFromConfig(adminConfig(t, f))
	arn := aws.String("arn:aws:iam::123456789012:policy/" + policy)
	if _, err := api.SetDefaultPolicyVersion(context.Background(), &iam.SetDefaultPolicyVersionInput{PolicyArn: arn, VersionId: aws.String("v1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.AttachRolePolicy(context.Background(), &iam.AttachRolePolicyInput{RoleName: aws.String(controllerRole), PolicyArn: arn}); err != nil {
		t.Fatal(err)
	}
}
