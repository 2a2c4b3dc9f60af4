//go:build image

package image_test

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/joiner-autoscaler/joiner/internal/image"
)

// TestImage reads the layout make image wrote (IMAGE_LAYOUT, default
// bin/image at the repository root): an index of linux/amd64 and linux/arm64, each an image of the binary alone that
// runs as the non-root user; and the binary of this machine's architecture,
// taken out of the image, runs and says its version and platform.
func TestImage(t *testing.T) {
	dir := os.Getenv("IMAGE_LAYOUT")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "image")
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("no OCI layout at %s (make image writes it): %v", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	// The layout's index.json is the multi-arch index itself, as
	// crane push or skopeo copy take it.
	inner := idx
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
