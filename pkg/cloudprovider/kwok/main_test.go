package kwok

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) { os.Exit(localcluster.Main(m, &cluster)) }

func kubeClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newProvider(t *testing.T, kube client.Client, opts Options) *CloudProvider {
	t.Helper()
	p, err := New(kube, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var nameSeq atomic.Int64

// uniqueName gives every test its own Nodes: the control plane is shared by
// the whole package, and kwok and the node lifecycle controller keep acting
// on Nodes after the test that made them ends.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, nameSeq.Add(1))
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func newNodeClaim(name string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{
			Requirements: reqs,
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		},
	}
}

// cleanupNode removes a Node after the test, stripping finalizers a test put
// on it so that the shared control plane does not accumulate Nodes.
func cleanupNode(t *testing.T, kube client.Client, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		node := &corev1.Node{}
		if err := kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return
		}
		if len(node.Finalizers) > 0 {
			patch := client.MergeFrom(node.DeepCopy())
			node.Finalizers = nil
			_ = kube.Patch(ctx, node, patch)
		}
		if err := kube.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up node %s: %v", name, err)
		}
	})
}

func getNode(t *testing.T, kube client.Client, name string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{}
	if err := kube.Get(context.Background(), types.NamespacedName{Name: name}, node); err != nil {
		t.Fatalf("getting node %s: %v", name, err)
	}
	return node
}

func nodeExists(t *testing.T, kube client.Client, name string) bool {
	t.Helper()
	err := kube.Get(context.Background(), types.NamespacedName{Name: name}, &corev1.Node{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("getting node %s: %v", name, err)
	}
	return err == nil
}

// eventually polls cond every 100ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func resourcesEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func fmtResources(rl corev1.ResourceList) string {
	var parts []string
	for k, q := range rl {
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, " ")
}
