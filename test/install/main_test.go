// Package install checks the Helm charts as a user meets them: lint,
// render with the installation guides' flags and values, a server-side dry
// run and a helm install on the local control plane.
package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) { os.Exit(localcluster.Main(m, &cluster)) }

// chart is a chart's directory in the repository.
func chart(name string) string { return filepath.Join(cluster.Root, "charts", name) }

// run runs a program of the control plane's kit against the test cluster
// and returns its stdout; on failure, the error carries stderr.
func run(t *testing.T, stdin io.Reader, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = errors.New(err.Error() + ": " + strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), err
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, nil, cluster.Bins.Helm, args...)
}

// render is helm template of the joiner chart in kube-system, as the guides
// install it, with the given extra arguments, after a values file naming
// the cluster (testdata/cluster-name.yaml), which the chart requires.
func render(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helm(t, append([]string{"template", "karpenter", chart("joiner"), "--namespace", "kube-system", "-f", "testdata/cluster-name.yaml"}, args...)...)
}

// objects decodes a multi-document manifest into typed objects by kind and
// name ("Deployment/karpenter").
func objects(t *testing.T, manifest string) map[string]runtime.Object {
	t.Helper()
	out := map[string]runtime.Object{}
	dec := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(string(doc)) == "---" {
			continue
		}
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("rendered object does not decode: %v\n%s", err, doc)
		}
		name := ""
		if m, ok := obj.(interface{ GetName() string }); ok {
			name = m.GetName()
		}
		out[gvk.Kind+"/"+name] = obj
	}
}
