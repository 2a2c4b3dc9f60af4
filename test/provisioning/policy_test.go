package provisioning

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/test/framework"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// class is the EC2NodeClass of framework.PoolAndClass, for tests that
// bring their own NodePool.
var class = strings.SplitN(framework.PoolAndClass, "---", 2)[0]

// Settings Joiner cannot honour stop it at start, naming the setting and
// the fix, instead of being ignored.
func TestSettingsRefusedAtStart(t *testing.T) {
	cases := []struct{ env, want string }{
		{"FEATURE_GATES=NodeOverlays=true", `invalid setting FEATURE_GATES (--feature-gates, from env FEATURE_GATES) "NodeOverlays=true": unknown feature gate "NodeOverlays"; known gates are CapacityBuffer, NodeOverlay, NodeRepair, ReservedCapacity, SpotToSpotConsolidation, StaticCapacity`},
		{"ENABLE_ZONAL_SHIFT=true", `invalid setting ENABLE_ZONAL_SHIFT true: zonal shifts are ARC's, on EKS clusters; it needs --cloud-provider=aws`},
		{"IGNORE_DRA_REQUESTS=false", `invalid setting IGNORE_DRA_REQUESTS "false": Joiner does not plan for DRA resource claims yet`},
		{"PREFERENCE_POLICY=Sometimes", `invalid setting PREFERENCE_POLICY (--preference-policy, from env PREFERENCE_POLICY) "Sometimes": want one of Respect, Ignore`},
		{"MIN_VALUES_POLICY=Lenient", `invalid setting MIN_VALUES_POLICY (--min-values-policy, from env MIN_VALUES_POLICY) "Lenient": want one of Strict, BestEffort`},
	}
	for _, tc := range cases {
		t.Run(tc.env, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, framework.Binary)
			cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Cluster.Kubeconfig, "METRICS_PORT=0", "HEALTH_PROBE_PORT=0", "DISABLE_LEADER_ELECTION=true", tc.env)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || ctx.Err() != nil {
				t.Fatalf("want joiner to exit with an error, got %v:\n%s", err, framework.TailLines(string(out), 20))
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// PREFERENCE_POLICY=Ignore reaches the provisioner: three replicas that
// would each prefer a node of their own share one.
func TestPreferencePolicyIgnore(t *testing.T) {
	framework.StartJoiner(t, "PREFERENCE_POLICY=Ignore")
	t.Cleanup(func() { framework.ResetCluster(t) })
	framework.Kubectl(t, framework.PoolAndClass, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("soft", 3, "250m", "256Mi", `      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: soft}}}
`), "apply", "-f", "-")
	framework.Eventually(t, 2*time.Minute, "3 soft pods Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "soft"})
		return n == 3, fmt.Sprintf("%d running on %v", n, nodes)
	})
	framework.WantClaims(t, 1)
}

// minPool asks for three families where the pods allow two.
const minPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: families}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5, m5, r5], minValues: 3}
`

const twoFamilies = `      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [c5, m5]}]
`

// MIN_VALUES_POLICY: Strict (the default) launches nothing and says which
// requirement; BestEffort launches with fewer and marks the NodeClaim.
func TestMinValuesPolicyEndToEnd(t *testing.T) {
	t.Run("Strict", func(t *testing.T) {
		framework.StartJoiner(t)
		t.Cleanup(func() { framework.ResetCluster(t) })
		framework.Kubectl(t, class+"---"+minPool, "apply", "-f", "-")
		framework.Kubectl(t, framework.Deployment("strict", 1, "250m", "256Mi", twoFamilies), "apply", "-f", "-")
		framework.WaitEvent(t, `nodepool "families": minValues 3 of requirement "karpenter.k8s.aws/instance-family" cannot be met: the instance types that can hold the pods have only 2 value(s)`)
		framework.WantClaims(t, 0)
	})
	t.Run("BestEffort", func(t *testing.T) {
		framework.StartJoiner(t, "MIN_VALUES_POLICY=BestEffort")
		t.Cleanup(func() { framework.ResetCluster(t) })
		framework.Kubectl(t, class+"---"+minPool, "apply", "-f", "-")
		framework.Kubectl(t, framework.Deployment("relaxed", 1, "250m", "256Mi", twoFamilies), "apply", "-f", "-")
		framework.Eventually(t, 2*time.Minute, "the relaxed pod Running", func() (bool, string) {
			n, nodes := framework.Running(t, map[string]string{"app": "relaxed"})
			return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
		})
		claims := framework.NodeClaims(t)
		if len(claims) != 1 {
			t.Fatalf("%d NodeClaims", len(claims))
		}
		if got := claims[0].Annotations[v1.AnnotationNodeClaimMinValuesRelaxed]; got != "true" {
			t.Fatalf("%s=%q", v1.AnnotationNodeClaimMinValuesRelaxed, got)
		}
		for _, r := range claims[0].Spec.Requirements {
			if r.Key == "karpenter.k8s.aws/instance-family" && (r.MinValues == nil || *r.MinValues != 2) {
				t.Fatalf("requirement %+v, want minValues lowered to 2", r)
			}
		}
	})
}

// A NodePool with spec.replicas is not a dynamic NodePool: it launches
// nothing for pending pods, and its status and the pods' events say why.
func TestStaticNodePoolLeftOut(t *testing.T) {
	framework.StartJoiner(t)
	t.Cleanup(func() { framework.ResetCluster(t) })
	static := strings.Replace(strings.SplitN(framework.PoolAndClass, "---", 2)[1], "spec:\n  template:", "spec:\n  replicas: 2\n  template:", 1)
	framework.Kubectl(t, class+"---"+static, "apply", "-f", "-")
	framework.Kubectl(t, framework.Deployment("waits", 1, "250m", "256Mi", ""), "apply", "-f", "-")
	framework.Eventually(t, time.Minute, "ValidationSucceeded=False naming spec.replicas", func() (bool, string) {
		np := &v1.NodePool{}
		if err := framework.Kube.Get(context.Background(), types.NamespacedName{Name: "default"}, np); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeValidationSucceeded)
		if c == nil {
			return false, "no condition"
		}
		return c.Status == "False" && strings.Contains(c.Message, "spec.replicas is set (2)") && strings.Contains(c.Message, "recreate it without spec.replicas"), c.Message
	})
	framework.WaitEvent(t, `nodepool "default": spec.replicas is set (2), which makes this a static NodePool`)
	framework.WantClaims(t, 0)
}

// NodeRepair=true starts the node repair controller.
func TestNodeRepairGateStartsRepair(t *testing.T) {
	j := framework.StartJoiner(t, "FEATURE_GATES=NodeRepair=true")
	framework.Eventually(t, time.Minute, "the node.repair controller's workers", func() (bool, string) {
		logs := j.Logs()
		return strings.Contains(logs, `"controller":"node.repair"`) && strings.Contains(logs, "Starting workers"), framework.TailLines(logs, 3)
	})
}
