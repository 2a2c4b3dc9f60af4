//go:build image

package image_test

import (
	"archive/tar"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/joiner-autoscaler/joiner/internal/image"
)

// TestImage reads the layout make image wrote (IMAGE_LAYOUT, default
// bin/image at the repository root): an index of linux/amd64 and linux/arm64, each an image of the binary alone that
// runs as the non-root user; and the binary of this machine's architecture,
// taken out of the image, runs and says its version and platform.
func TestImage(t *testing.T) {
	dir := layoutDir()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("no OCI layout at %s (make image writes it): %v", dir, err)
	}
	inner, _ := tagged(t, p)
	manifest, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v1.Image{}
	for _, d := range manifest.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		got[d.Platform.OS+"/"+d.Platform.Architecture] = img
	}
	for _, want := range image.Platforms {
		platform := want.OS + "/" + want.Architecture
		img, ok := got[platform]
		if !ok {
			t.Errorf("no %s image; have %v", platform, keys(got))
			continue
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != want.OS || cfg.Architecture != want.Architecture {
			t.Errorf("%s: config says %s/%s", platform, cfg.OS, cfg.Architecture)
		}
		if strings.Join(cfg.Config.Entrypoint, " ") != "/joiner" {
			t.Errorf("%s: entrypoint %v, want [/joiner], the chart's", platform, cfg.Config.Entrypoint)
		}
		if u := cfg.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || u == "root" {
			t.Errorf("%s: user %q, want non-root", platform, u)
		}
		files := filesOf(t, img)
		if len(files) != 1 || files["joiner"] == nil {
			t.Errorf("%s: files %v, want the binary alone", platform, keys(files))
		}
		if runtime.GOOS+"/"+runtime.GOARCH != platform {
			continue
		}
		bin := filepath.Join(t.TempDir(), "joiner")
		if err := os.WriteFile(bin, files["joiner"], 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(context.Background(), bin, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "joiner ") || !strings.Contains(string(out), platform) {
			t.Errorf("%s: --version said %q (%v)", platform, out, err)
		}
	}
}

// tagged is the layout's one image, the multi-arch index, and its tag:
// index.json lists it once, with the tag as its ref.name, as crane push and
// skopeo copy --all oci:DIR:TAG read a layout.
func tagged(t *testing.T, p layout.Path) (v1.ImageIndex, string) {
	t.Helper()
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex || m.Manifests[0].Annotations[image.RefName] == "" {
		t.Fatalf("index.json lists %+v; want one tagged OCI image index", m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx, m.Manifests[0].Annotations[image.RefName]
}

// TestPublish publishes the layout as the docs say, into a registry
// (go-containerregistry's, in process): crane push (the layout's one entry,
// the multi-arch index), and skopeo copy --all from oci:DIR:TAG. Each pulled back by its tag is the index make
// image wrote, and its binary for this machine runs.
func TestPublish(t *testing.T) {
	dir := layoutDir()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("no OCI layout at %s (make image writes it): %v", dir, err)
	}
	idx, tag := tagged(t, p)
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		tool string
		repo string
		cmd  []string
	}{
		{"crane push", "crane", []string{"go", "run", "github.com/google/go-containerregistry/cmd/crane@" + craneVersion, "push", "--insecure", dir, host + "/crane:" + tag}},
		{"skopeo copy --all", "skopeo", []string{"skopeo", "copy", "--all", "--dest-tls-verify=false", "oci:" + dir + ":" + tag, "docker://" + host + "/skopeo:" + tag}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			cmd := exec.CommandContext(context.Background(), tc.cmd[0], tc.cmd[1:]...)
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(tc.cmd, " "), err, out)
			}
			ref, err := name.ParseReference(host + "/" + tc.repo + ":" + tag)
			if err != nil {
				t.Fatal(err)
			}
			pulled, err := remote.Index(ref)
			if err != nil {
				t.Fatalf("pulling %s: %v", ref, err)
			}
			// crane pushes the index as it is; skopeo writes it again
			// (its digest changes), with the same images.
			if got, _ := pulled.Digest(); got != want && tc.repo == "crane" {
				t.Errorf("%s pulled back as %s, want the layout's index %s", ref, got, want)
			}
			if got, want := platforms(t, pulled), platforms(t, idx); !reflect.DeepEqual(got, want) {
				t.Errorf("%s holds %v, want the layout's %v", ref, got, want)
			}
			img, err := remote.Image(ref, remote.WithPlatform(v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}))
			if err != nil {
				t.Fatalf("pulling %s for %s/%s: %v", ref, runtime.GOOS, runtime.GOARCH, err)
			}
			bin := filepath.Join(t.TempDir(), "joiner")
			if err := os.WriteFile(bin, filesOf(t, img)["joiner"], 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(context.Background(), bin, "--version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "joiner ") {
				t.Errorf("the pulled binary's --version said %q (%v)", out, err)
			}
		})
	}
}

// platforms maps each platform of an index to its image's digest.
func platforms(t *testing.T, idx v1.ImageIndex) map[string]string {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range m.Manifests {
		if d.Platform != nil {
			out[d.Platform.OS+"/"+d.Platform.Architecture] = d.Digest.String()
		}
	}
	return out
}

// craneVersion is go-containerregistry's version in go.mod: crane the
// same code as the registry and the layout writer.
const craneVersion = "v0.22.1"

// layoutDir is where make image wrote the layout (IMAGE_LAYOUT, default
// bin/image at the repository root).
func layoutDir() string {
	if dir := os.Getenv("IMAGE_LAYOUT"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "bin", "image")
}

// filesOf reads the image's flattened file system.
func filesOf(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
