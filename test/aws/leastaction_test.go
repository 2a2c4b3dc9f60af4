//go:build leastprivilege

package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestEachActionAndResourceNeeded is least privilege below the statement:
// under Joiner's stack, the guide's walkthrough and Joiner's own features
// (TestOwnFeaturesUnderOwnStack's scenario) run once, and each
// authorization they needed is recorded. Then every action of a statement
// that lists several, and every resource ARN of one that lists several, is
// taken out in turn, and the recorded authorizations are evaluated again:
// some call must then be refused, and the test names the first. An action
// or ARN no call needs fails the test, unless allowedUnused says why it
// stays.
func TestEachActionAndResourceNeeded(t *testing.T) {
	kubeconfig := chartRBAC(t)
	framework.ResetCluster(t)
	f, role := underStack(t, joinerStack, sixPolicies, guideV114)
	j := startController(t, f, role, kubeconfig, guideV114)
	framework.Kubectl(t, walkthroughManifest(t), "apply", "-f", "-")
	steps(t, f, func() bool { return false })
	framework.ResetCluster(t)
	j.Stop(syscall.SIGTERM)
	ownFeatures(t, f, role, kubeconfig)

	ctx := context.Background()
	policies, err := f.RolePolicies(ctx, controllerRole)
	if err != nil {
		t.Fatal(err)
	}
	auths := distinct(f.Authorizations())
	t.Logf("%d distinct authorizations recorded", len(auths))
	var rows []string
	for i, p := range policies {
		doc, _ := p.Policy.(map[string]any)
		statements, _ := doc["Statement"].([]any)
		for k, st := range statements {
			m, _ := st.(map[string]any)
			if m["Effect"] != "Allow" {
				continue
			}
			sid := fmt.Sprint(m["Sid"])
			for _, field := range []string{"Action", "Resource"} {
				items := stringList(m[field])
				if len(items) < 2 {
					continue // the statement-level test covers it
				}
				for n, item := range items {
					cut := map[string]any{}
					for key, v := range m {
						cut[key] = v
					}
					cut[field] = slices.Delete(slices.Clone(items), n, n+1)
					variant := slices.Clone(policies)
					stmts := slices.Clone(statements)
					stmts[k] = cut
					variant[i] = fakeaws.PolicyDocument{Name: p.Name, Policy: map[string]any{"Version": doc["Version"], "Statement": stmts}}
					refused := ""
					for _, a := range auths {
						result, err := f.Evaluate(ctx, variant, a)
						if err != nil {
							t.Fatal(err)
						}
						if result != "Allowed" && result != "NotApplicable" {
							refused = fmt.Sprintf("%s (%s on %s)", a.Call, a.Action, a.Resource)
							break
						}
					}
					key := sid + " " + strings.ToLower(field) + " " + item
					switch why, ok := allowedUnused[sid+"/"+item]; {
					case refused != "":
						rows = append(rows, fmt.Sprintf("| %s | %s | %s | `%s` | %s |", p.Name, sid, strings.ToLower(field), item, refused))
					case ok:
						rows = append(rows, fmt.Sprintf("| %s | %s | %s | `%s` | kept: %s |", p.Name, sid, strings.ToLower(field), item, why))
					default:
						t.Errorf("%s: no call of the runs needs it; remove it or say in allowedUnused why it stays", key)
					}
				}
			}
		}
	}
	t.Logf("each action and resource taken out, and the first call then refused:\n| policy | statement | field | taken out | first call refused |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// allowedUnused are the actions and resource ARNs of Joiner's stack the
// runs do not need, by "Sid/item", with why they stay.
var allowedUnused = map[string]string{
	// EC2 authorizes RunInstances on the snapshots of an EBS-backed
	// image; the local endpoint's images have none to authorize.
	"LaunchFromImagesSubnetsAndGroups/arn:aws:ec2:us-east-1::snapshot/*": "EBS-backed images' snapshots, which the local images lack",
}

// distinct drops repeated authorizations (same call, action, resource
// and context), which would only be evaluated again.
func distinct(in []fakeaws.Authorization) []fakeaws.Authorization {
	seen := map[string]bool{}
	var out []fakeaws.Authorization
	for _, a := range in {
		key := fmt.Sprint(a.Call, a.Principal, a.Action, a.Resource, a.Context)
		if !seen[key] {
			seen[key] = true
			out = append(out, a)
		}
	}
	return out
}

// stringList reads a policy field that is a string or a list of them.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}
