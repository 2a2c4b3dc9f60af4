// Package crds checks, against a real kube-apiserver, that Joiner's CRDs
// accept and reject what Karpenter v1.14's CRDs accept and reject, with the
// same messages, defaults and printer columns.
package crds

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) { os.Exit(localcluster.Main(m, &cluster)) }

var (
	nodePools      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaims     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	ec2NodeClasses = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	nodeOverlays   = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1alpha1", Resource: "nodeoverlays"}
	// capacityBuffers are namespaced; the tests keep them in "default".
	capacityBuffers = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Resource: "capacitybuffers"}
)

func dyn(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	c, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// resourceFor is where objects of kind are created: the cluster scope for
// all but CapacityBuffer, which lives in the default namespace.
func resourceFor(client dynamic.Interface, kind string) dynamic.ResourceInterface {
	switch kind {
	case "NodePool":
		return client.Resource(nodePools)
	case "NodeClaim":
		return client.Resource(nodeClaims)
	case "NodeOverlay":
		return client.Resource(nodeOverlays)
	case "CapacityBuffer":
		return client.Resource(capacityBuffers).Namespace("default")
	default:
		return client.Resource(ec2NodeClasses)
	}
}

// obj parses YAML into an unstructured object.
func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// kubectl runs the control plane's kubectl against the test cluster.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), cluster.Bins.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}
