// Package image builds Joiner's container image: a multi-arch OCI index of
// one static binary, with no base image, no Docker daemon and no registry,
// so that make image works on a machine that reaches nothing but the Go
// module proxy. The binary carries Mozilla's root certificates
// (x509roots/fallback) for the AWS endpoints, so the image needs no files
// besides it.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Entrypoint is the binary's path in the image, the chart's command.
	Entrypoint = "/joiner"
	// User is the distroless "nonroot" user and group, which the chart's
	// securityContext runs as (runAsUser and fsGroup 65532).
	User = "65532:65532"
)

// Platforms are the architectures EKS nodes run.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Options say what to build.
type Options struct {
	// Root is the repository root.
	Root string
	// Version is the release the binary reports (main.version).
	Version string
	// Platforms default to Platforms.
	Platforms []v1.Platform
	// Created is the images' creation time; zero is the epoch, so equal
	// sources make equal images.
	Created time.Time
}

// RefName is the OCI annotation naming a layout's image by its tag: what
// skopeo copy oci:DIR:TAG and oras look a tag up by.
const RefName = "org.opencontainers.image.ref.name"

// Build writes the image index into an OCI layout at dir (created or
// replaced) and returns the index. The layout's index.json lists the
// multi-arch index once, tagged with the version (RefName), as the OCI
// image layout describes a tagged image: crane push (which pushes a
// layout's one entry as it is), skopeo copy --all oci:DIR:TAG and oras cp
// --from-oci-layout DIR:TAG take it as one multi-arch image.
func Build(ctx context.Context, dir string, o Options) (v1.ImageIndex, error) {
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = Platforms
	}
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := platformImage(ctx, o, p)
		if err != nil {
			return nil, err
		}
		p := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	tag := o.Version
	if tag == "" {
		tag = "dev"
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: tag})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return idx, nil
}

// platformImage cross-compiles the binary for p and makes it the image's
// one layer.
func platformImage(ctx context.Context, o Options, p v1.Platform) (v1.Image, error) {
	tmp, err := os.MkdirTemp("", "joiner-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "joiner")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-s -w -X main.version="+o.Version, "./cmd/joiner")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building joiner for %s/%s: %w\n%s", p.OS, p.Architecture, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(binaryTar(data, o.Created))), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "joiner",
		"org.opencontainers.image.version": o.Version,
		"org.opencontainers.image.source":  "https://github.com/joiner-autoscaler/joiner",
	}
	return mutate.ConfigFile(img, cfg)
}

// binaryTar is a layer holding the binary at Entrypoint, owned by root and
// executable by all, so the non-root user runs it but cannot change it.
func binaryTar(data []byte, mod time.Time) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(Entrypoint, "/"), Mode: 0o755, Size: int64(len(data)),
		ModTime: mod, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	_, _ = tw.Write(data)
	_ = tw.Close()
	return buf.Bytes()
}
