package aws

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// access is how a guide gives the controller its role, and what its helm
// flags turn on.
type access struct {
	// podIdentity: EKS Pod Identity (v1.14's guide), else IRSA (v1.1.3's).
	podIdentity bool
	// zonalShift: settings.enableZonalShift=true (v1.14's guide default).
	zonalShift bool
}

var (
	irsa      = access{}
	guideV114 = access{podIdentity: true, zonalShift: true}
)

// podIdentityTrust is what eksctl's podIdentityAssociations gives the role.
const podIdentityTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}]}`

// issuer is the local API server's service account issuer, which stands
// for the cluster's OIDC issuer (oidc.eks.<region>.amazonaws.com/id/...).
const issuer = "kubernetes.default.svc.cluster.local"

// irsaTrust registers the cluster's OIDC provider in IAM, as eksctl's
// withOIDC does, and returns the trust policy eksctl create
// iamserviceaccount gives the role: the provider, for the chart's service
// account (sub) and STS (aud).
func irsaTrust(t *testing.T, f *fakeaws.Server) string {
	t.Helper()
	_, err := iam.NewFromConfig(adminConfig(t, f)).CreateOpenIDConnectProvider(context.Background(), &iam.CreateOpenIDConnectProviderInput{
		Url: aws.String("https://" + issuer), ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{strings.Repeat("0", 40)}})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/%[1]s"},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"%[1]s:sub":"system:serviceaccount:kube-system:karpenter","%[1]s:aud":"sts.amazonaws.com"}}}]}`, issuer)
}

// serviceAccountToken writes a token of kube-system/karpenter (the chart's
// service account) for audience to a file, as the kubelet projects it into
// the pod: sts.amazonaws.com for IRSA, pods.eks.amazonaws.com for the Pod
// Identity agent.
func serviceAccountToken(t *testing.T, audience string) string {
	t.Helper()
	token := strings.TrimSpace(framework.Kubectl(t, "", "create", "token", "karpenter", "--namespace", "kube-system", "--audience", audience, "--duration", "2h"))
	path := filepath.Join(t.TempDir(), "token-"+audience)
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// guideHelmFlags are the --set flags of the guide's helm command (v1.14's
// step 8; v1.1.3's lacks zonal shift and sets the IRSA role).
func guideHelmFlags(how access) []string {
	flags := []string{"settings.clusterName=" + clusterName, "settings.interruptionQueue=" + clusterName,
		"controller.resources.requests.cpu=1", "controller.resources.requests.memory=1Gi",
		"controller.resources.limits.cpu=1", "controller.resources.limits.memory=1Gi"}
	if how.zonalShift {
		flags = append(flags, "settings.enableZonalShift=true")
	}
	if !how.podIdentity {
		flags = append(flags, `serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::123456789012:role/`+controllerRole)
	}
	return flags
}

// chartEnv is the controller's environment as the chart renders it for the
// guide's flags: the plain values (the downward API's are the pod's). The
// ports are left to the test, which runs many controllers on one host.
func chartEnv(t *testing.T, how access) []string {
	t.Helper()
	args := []string{"template", "karpenter", filepath.Join(framework.Cluster.Root, "charts", "joiner"), "--namespace", "kube-system"}
	for _, f := range guideHelmFlags(how) {
		args = append(args, "--set", f)
	}
	out, err := exec.Command(framework.Cluster.Bins.Helm, args...).Output()
	if err != nil {
		t.Fatalf("helm template with the guide's flags: %v", err)
	}
	for _, doc := range strings.Split(string(out), "\n---") {
		var d appsv1.Deployment
		if err := sigsyaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		var env []string
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom == nil && e.Name != "METRICS_PORT" && e.Name != "HEALTH_PROBE_PORT" {
				env = append(env, e.Name+"="+e.Value)
			}
		}
		return env
	}
	t.Fatal("the chart renders no Deployment")
	return nil
}

// zonalShiftAwayFrom is issue 36's zonal shift acceptance, after the
// scale-up: awscli shifts traffic away from the first node's zone ID; a
// pod that cannot share that node gets a node in another zone, and one
// that must run in that zone waits; when the shift is cancelled, that pod
// gets its node in the zone.
func zonalShiftAwayFrom(t *testing.T, f *fakeaws.Server, first v1.NodeClaim) {
	t.Helper()
	zone, zoneID := first.Labels[corev1.LabelTopologyZone], first.Labels["topology.k8s.aws/zone-id"]
	if zoneID == "" {
		t.Fatalf("nodeclaim %s has no zone ID label", first.Name)
	}
	before := map[string]bool{}
	for _, nc := range framework.NodeClaims(t) {
		before[nc.Name] = true
	}
	arn := fmt.Sprintf("arn:aws:eks:%s:123456789012:cluster/%s", region, clusterName)
	var shift struct{ ZonalShiftID string }
	awsCLIJSON(t, f, &shift, "arc-zonal-shift", "start-zonal-shift", "--resource-identifier", arn, "--away-from", zoneID, "--expires-in", "1h", "--comment", "joiner acceptance")
	framework.WaitForEvent(t, 2*time.Minute, "ZonalShiftActive", "default", fmt.Sprintf("offerings in zone %s (%s) are unavailable", zone, zoneID))

	apart := `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: inflate}}}
`
	framework.Kubectl(t, framework.Deployment("elsewhere", 1, "1", "1Gi", apart)+"---\n"+
		framework.Deployment("pinned", 1, "1", "1Gi", apart+"      nodeSelector: {topology.kubernetes.io/zone: "+zone+"}\n"), "apply", "-f", "-")
	t.Cleanup(func() { framework.Kubectl(t, "", "delete", "deployment", "elsewhere", "pinned", "--ignore-not-found") })
	framework.Eventually(t, 3*time.Minute, "the elsewhere pod Running", func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "elsewhere"})
		return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	pinned := podOf(t, "pinned")
	framework.WaitForEvent(t, 2*time.Minute, "FailedScheduling", pinned, "Failed to schedule pod")
	for _, nc := range framework.NodeClaims(t) {
		if !before[nc.Name] && nc.Labels[corev1.LabelTopologyZone] == zone {
			t.Errorf("nodeclaim %s launched into %s (%s) during the shift away from it", nc.Name, zone, zoneID)
		}
	}

	awsCLI(t, f, "arc-zonal-shift", "cancel-zonal-shift", "--zonal-shift-id", shift.ZonalShiftID)
	framework.WaitForEvent(t, 2*time.Minute, "ZonalShiftCleared", "default", fmt.Sprintf("offerings in zone %s (%s) are restored", zone, zoneID))
	framework.Eventually(t, 3*time.Minute, "the pinned pod Running in "+zone, func() (bool, string) {
		n, nodes := framework.Running(t, map[string]string{"app": "pinned"})
		return n == 1, fmt.Sprintf("%d running on %v", n, nodes)
	})
	back := false
	for _, nc := range framework.NodeClaims(t) {
		back = back || (!before[nc.Name] && nc.Labels[corev1.LabelTopologyZone] == zone)
	}
	if !back {
		t.Errorf("no nodeclaim launched into %s (%s) after the shift ended", zone, zoneID)
	}
	framework.Kubectl(t, "", "delete", "deployment", "elsewhere", "pinned")
}

// podOf is the name of the one pod of a Deployment.
func podOf(t *testing.T, app string) string {
	t.Helper()
	var name string
	framework.Eventually(t, time.Minute, "a pod of "+app, func() (bool, string) {
		name = strings.TrimSpace(framework.Kubectl(t, "", "get", "pods", "-l", "app="+app, "-o", "jsonpath={.items[0].metadata.name}"))
		return name != "", ""
	})
	return name
}

// noCredentialsForOthers: the Pod Identity agent gives a token of another
// service account nothing.
func noCredentialsForOthers(t *testing.T, f *fakeaws.Server) {
	t.Helper()
	token := strings.TrimSpace(framework.Kubectl(t, "", "create", "token", "default", "--namespace", "kube-system", "--audience", "pods.eks.amazonaws.com"))
	req, err := http.NewRequest(http.MethodGet, f.URL()+fakeaws.PodIdentityPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "AccessKeyId") {
		t.Errorf("kube-system/default got credentials from the Pod Identity agent: %d %s", resp.StatusCode, body)
	}
}

// noWebIdentityForOthers: STS refuses the role to a token of another
// service account, and to the chart's account's token for another
// audience, as the trust policy's sub and aud conditions say.
func noWebIdentityForOthers(t *testing.T, f *fakeaws.Server) {
	t.Helper()
	for _, tc := range []struct{ account, audience string }{{"default", "sts.amazonaws.com"}, {"karpenter", "other.example.com"}} {
		token := strings.TrimSpace(framework.Kubectl(t, "", "create", "token", tc.account, "--namespace", "kube-system", "--audience", tc.audience))
		cmd := exec.Command("aws", "--endpoint-url", f.URL(), "--region", region, "sts", "assume-role-with-web-identity",
			"--role-arn", "arn:aws:iam::123456789012:role/"+controllerRole, "--role-session-name", "other", "--web-identity-token", token)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "AccessDenied") {
			t.Errorf("a token of kube-system/%s for %s: %v %s, want AccessDenied", tc.account, tc.audience, err, out)
		}
	}
}
