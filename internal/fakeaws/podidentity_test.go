package fakeaws_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const podIdentityTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}]}`

// serviceAccountToken makes ns/name and returns a token of it for
// audience, as the kubelet projects one.
func serviceAccountToken(t *testing.T, ns, name, audience string) string {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := must(kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{}))(t)
	return tr.Status.Token
}

// credentialsFor asks the endpoint's Pod Identity agent, as the SDK does.
func credentialsFor(t *testing.T, token string) (int, string) {
	t.Helper()
	req := must(http.NewRequest(http.MethodGet, fake.URL()+fakeaws.PodIdentityPath, nil))(t)
	req.Header.Set("Authorization", token)
	resp := must(http.DefaultClient.Do(req))(t)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// EKS Pod Identity as the guide's eksctl config sets it up: awscli binds a
// service account to a role that trusts pods.eks.amazonaws.com, and the
// SDK's default chain, given the agent's two variables, gets a session of
// that role. Tokens that are not the bound account's get nothing.
func TestPodIdentity(t *testing.T) {
	ctx := context.Background()
	c := clients(t)
	for name, trust := range map[string]string{"pi-controller": podIdentityTrust,
		"pi-no-tag-session": strings.Replace(podIdentityTrust, `,"sts:TagSession"`, "", 1)} {
		must(c.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust)}))(t)
	}
	awsCLI(t, "eks", "create-pod-identity-association", "--cluster-name", clusterName, "--namespace", "kube-system",
		"--service-account", "pi-controller", "--role-arn", "arn:aws:iam::123456789012:role/pi-controller")
	awsCLI(t, "eks", "create-pod-identity-association", "--cluster-name", clusterName, "--namespace", "kube-system",
		"--service-account", "pi-untrusted", "--role-arn", "arn:aws:iam::123456789012:role/pi-no-tag-session")
	listed := awsCLI(t, "eks", "list-pod-identity-associations", "--cluster-name", clusterName, "--namespace", "kube-system")
	if items, _ := listed["associations"].([]any); len(items) != 2 {
		t.Fatalf("list-pod-identity-associations: %s", describe(listed))
	}

	// The SDK's default chain, as in a pod the agent serves.
	token := serviceAccountToken(t, "kube-system", "pi-controller", "pods.eks.amazonaws.com")
	tokenFile := filepath.Join(t.TempDir(), "eks-pod-identity-token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.URL()+fakeaws.PodIdentityPath)
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile)
	cfg := must(config.LoadDefaultConfig(ctx, config.WithRegion(region)))(t)
	who := must(sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}))(t)
	if arn := aws.ToString(who.Arn); !strings.Contains(arn, ":assumed-role/pi-controller/") {
		t.Errorf("the pod is %s, want a session of role pi-controller", arn)
	}

	cases := []struct {
		name   string
		token  string
		status int
		want   string
	}{
		{"another service account", serviceAccountToken(t, "default", "default", "pods.eks.amazonaws.com"), http.StatusBadRequest, "no EKS Pod Identity association for service account default/default"},
		{"the bound account, for another audience", serviceAccountToken(t, "kube-system", "pi-controller", "sts.amazonaws.com"), http.StatusUnauthorized, "not a valid service account token for audience pods.eks.amazonaws.com"},
		{"a role that does not trust the agent fully", serviceAccountToken(t, "kube-system", "pi-untrusted", "pods.eks.amazonaws.com"), http.StatusForbidden, "must allow the service principal pods.eks.amazonaws.com the action sts:TagSession"},
		{"no token", "", http.StatusBadRequest, "no service account token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := credentialsFor(t, tc.token)
			if status != tc.status || !strings.Contains(body, tc.want) || strings.Contains(body, "AccessKeyId") {
				t.Fatalf("%d %s, want %d with %q and no credentials", status, body, tc.status, tc.want)
			}
		})
	}
}
