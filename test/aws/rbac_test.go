package aws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"github.com/joiner-autoscaler/joiner/test/framework"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	sigsyaml "sigs.k8s.io/yaml"
)

// chartRBAC installs the chart's RBAC for the release the guides name
// (karpenter, in kube-system: the service account karpenter), without its
// controller (replicas 0: the test runs it), and returns a kubeconfig that
// authenticates as that service account with a token, as the controller
// does in its pod (and so the audit log, which records that user alone,
// sees each request).
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
	token := strings.TrimSpace(framework.Kubectl(t, "", "create", "token", "karpenter", "--namespace", "kube-system", "--duration", "2h"))
	cfg, err := clientcmd.LoadFromFile(framework.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-karpenter")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// rbacRule is one rule of the chart's ClusterRole or Roles, with the
// namespace a Role is in ("" for the ClusterRole).
type rbacRule struct {
	namespace string
	rbacv1.PolicyRule
}

// chartRules renders the chart as chartRBAC installs it and returns its
// RBAC rules.
func chartRules(t *testing.T) []rbacRule {
	t.Helper()
	cmd := exec.Command(framework.Cluster.Bins.Helm, "template", "karpenter", filepath.Join(framework.Cluster.Root, "charts", "joiner"),
		"--namespace", "kube-system", "--set", "replicas=0", "--set", "settings.clusterName="+clusterName)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var rules []rbacRule
	for _, doc := range strings.Split(string(out), "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		// The admin role's rules are namespace admins', not the controller's.
		if obj.Metadata.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true" {
			continue
		}
		for _, r := range obj.Rules {
			if obj.Kind == "ClusterRole" {
				rules = append(rules, rbacRule{PolicyRule: r})
			} else if obj.Kind == "Role" {
				rules = append(rules, rbacRule{namespace: obj.Metadata.Namespace, PolicyRule: r})
			}
		}
	}
	return rules
}

// everyRBACRuleUsed reads the audit log of the chart's service account: no
// request was forbidden, and every verb of every rule was used, or is kept
// for a reason (rbacKept).
func everyRBACRuleUsed(t *testing.T) {
	t.Helper()
	if framework.Cluster.AuditLog == "" {
		t.Log("a reused cluster (JOINER_TEST_KUBECONFIG) has no audit log: the RBAC rules' use is not checked")
		return
	}
	data, err := os.ReadFile(framework.Cluster.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	rules := chartRules(t)
	used := map[string]bool{}
	requests := 0
	for _, line := range strings.Split(string(data), "\n") {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource, Subresource, Namespace, Name string
				APIGroup                               string `json:"apiGroup"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if line == "" || json.Unmarshal([]byte(line), &ev) != nil || ev.User.Username != localcluster.AuditedUser || ev.ObjectRef == nil {
			continue
		}
		requests++
		ref := ev.ObjectRef
		resource := ref.Resource
		if ref.Subresource != "" {
			resource += "/" + ref.Subresource
		}
		if ev.ResponseStatus.Code == http.StatusForbidden {
			t.Errorf("forbidden: %s %s %s/%s", ev.Verb, resource, ref.Namespace, ref.Name)
			continue
		}
		for i, r := range rules {
			if (r.namespace == "" || r.namespace == ref.Namespace) && slices.Contains(r.APIGroups, ref.APIGroup) && slices.Contains(r.Resources, resource) &&
				slices.Contains(r.Verbs, ev.Verb) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, ref.Name)) {
				used[fmt.Sprintf("%d %s", i, ev.Verb)] = true
			}
		}
	}
	if requests == 0 {
		t.Fatalf("the audit log %s has no request of %s", framework.Cluster.AuditLog, localcluster.AuditedUser)
	}
	for i, r := range rules {
		for _, verb := range r.Verbs {
			if used[fmt.Sprintf("%d %s", i, verb)] {
				continue
			}
			why := ""
			for _, res := range r.Resources {
				if reason, ok := rbacKept[res+" "+verb]; ok {
					why = reason
				}
			}
			if why == "" {
				t.Errorf("RBAC: nothing used %s on %v (%v) in %q; remove it, or keep it with the reason", verb, r.Resources, r.APIGroups, r.namespace)
			} else {
				t.Logf("RBAC: %s on %v unused in the walkthrough, kept: %s", verb, r.Resources, why)
			}
		}
	}
}
