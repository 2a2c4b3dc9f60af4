//go:build image

package install

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// TestChartRunsTheImage is the image published and run: the layout make
// image wrote is pushed to a registry (go-containerregistry's, in process);
// helm install --wait, with the chart's image set to it by digest, comes up
// Ready on a (kwok) node; and the joiner binary of this machine's platform,
// pulled back from the registry by the reference the Deployment names and
// taken from the image's file system, runs with the Deployment's container
// environment against this control plane and a local AWS endpoint: it
// answers the Deployment's readiness probe and takes the leader lease the
// chart names. make image runs it (-tags image).
func TestChartRunsTheImage(t *testing.T) {
	ctx := context.Background()
	dir := os.Getenv("IMAGE_LAYOUT")
	if dir == "" {
		dir = filepath.Join(cluster.Root, "bin", "image")
	}
	idx := layoutIndex(t, dir)
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/joiner"
	pushed, err := name.ParseReference(repo + ":test")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(pushed, idx); err != nil {
		t.Fatalf("pushing the layout's index to %s: %v", pushed, err)
	}

	// A node for the Deployment: Linux, in a zone (the chart spreads the
	// replicas over zones), not one Joiner manages.
	node := `apiVersion: v1
kind: Node
metadata:
  name: system-0
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: system-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64, topology.kubernetes.io/zone: us-east-1a}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`
	if out, err := run(t, strings.NewReader(node), cluster.Bins.Kubectl, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply node: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, nil, cluster.Bins.Kubectl, "delete", "node", "system-0") })
	const ns, release = "kube-system", "karpenter"
	if out, err := helm(t, "install", release, chart("joiner"), "--namespace", ns, "--wait", "--timeout", "3m",
		"--set", "settings.clusterName=demo", "--set", "replicas=1",
		"--set", "controller.image.repository="+repo, "--set", "controller.image.digest="+digest.String()); err != nil {
		t.Fatalf("helm install --wait: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := helm(t, "uninstall", release, "--namespace", ns, "--wait"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})
	out, err := run(t, nil, cluster.Bins.Kubectl, "get", "deployment", release, "--namespace", ns, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := sigsyaml.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas != 1 {
		t.Fatalf("the Deployment has %d ready replicas after helm install --wait, want 1", d.Status.ReadyReplicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if want := repo + "@" + digest.String(); c.Image != want {
		t.Fatalf("the Deployment runs %s, want %s", c.Image, want)
	}

	// The Deployment's image, for this machine, from the registry.
	ref, err := name.ParseReference(c.Image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithPlatform(ggcrv1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}))
	if err != nil {
		t.Fatalf("pulling %s for %s/%s: %v", ref, runtime.GOOS, runtime.GOARCH, err)
	}
	bin := filepath.Join(t.TempDir(), "joiner")
	if err := os.WriteFile(bin, fileOf(t, img, "joiner"), 0o755); err != nil {
		t.Fatal(err)
	}

	fake, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: "demo", Region: "us-east-1", Kubeconfig: cluster.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Stop)
	health, metrics := framework.FreePort(t), framework.FreePort(t)
	env := append(containerEnv(t, c, ns),
		// Out of the pod: the control plane's kubeconfig for the service
		// account's mount, the local AWS endpoint and its credentials for
		// the pod's identity, and free ports for the pod's own.
		"KUBECONFIG="+cluster.Kubeconfig, "AWS_REGION=us-east-1", "AWS_ENDPOINT_URL="+fake.URL(),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"HEALTH_PROBE_PORT="+strconv.Itoa(health), "METRICS_PORT="+strconv.Itoa(metrics))
	lease := envValue(c, "LEADER_ELECTION_NAME")
	if _, err := run(t, nil, cluster.Bins.Kubectl, "get", "lease", lease, "--namespace", ns); err == nil {
		t.Fatalf("lease %s/%s exists before the image's binary runs: its holder would prove nothing", ns, lease)
	}
	cmd := exec.CommandContext(ctx, bin, c.Args...)
	cmd.Env = env
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("running the image's binary: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	probe := c.ReadinessProbe.HTTPGet.Path
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready, holder := false, ""
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", health, probe)); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if out, err := run(t, nil, cluster.Bins.Kubectl, "get", "lease", lease, "--namespace", ns, "-o", "yaml"); err == nil {
			var l coordinationv1.Lease
			if sigsyaml.Unmarshal([]byte(out), &l) == nil && l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
		}
		if ready && holder != "" {
			t.Logf("the image's binary (%s) answers %s and holds lease %s/%s as %s", c.Image, probe, ns, lease, holder)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2m the image's binary answers %s: %v; lease %s holder %q; its log:\n%s", probe, ready, lease, holder, framework.TailLines(logs.String(), 40))
		}
		time.Sleep(time.Second)
	}
}

// layoutIndex is the multi-arch index of the layout make image wrote (its
// one entry).
func layoutIndex(t *testing.T, dir string) ggcrv1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("no OCI layout at %s (make image writes it): %v", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the layout's index lists %d entries (%v), want the one multi-arch index", len(m.Manifests), err)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// containerEnv is the container's environment as the kubelet would set
// it: values, the pod's namespace, and the resource fields.
func containerEnv(t *testing.T, c corev1.Container, ns string) []string {
	t.Helper()
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out = append(out, e.Name+"="+ns)
		case e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			list := c.Resources.Limits
			if strings.HasPrefix(r.Resource, "requests.") {
				list = c.Resources.Requests
			}
			q := list[corev1.ResourceName(strings.SplitN(r.Resource, ".", 2)[1])]
			if r.Divisor.IsZero() {
				out = append(out, fmt.Sprintf("%s=%d", e.Name, q.Value()))
			} else {
				out = append(out, fmt.Sprintf("%s=%d", e.Name, q.MilliValue()/r.Divisor.MilliValue()))
			}
		default:
			t.Fatalf("the container's %s comes from %+v, which this test cannot set", e.Name, e.ValueFrom)
		}
	}
	return out
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// fileOf reads one file of the image's flattened file system.
func fileOf(t *testing.T, img ggcrv1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("the image has no %s", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}
