package fakeaws

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws/userdata"
)

// DefaultKubernetesVersions are the versions whose node images the endpoint
// publishes.
var DefaultKubernetesVersions = []string{"1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35"}

// Account IDs that own the public node images, as DescribeImages reports.
const (
	ownerEKS          = "602401143452"
	ownerBottlerocket = "092701018921"
	ownerWindows      = "801119661308"
	accountID         = "123456789012" // moto's account
)

// image is a node image the endpoint published: an AMI in moto and the
// public SSM parameters that point at it.
type image struct {
	ID           string
	Name         string
	Description  string
	Arch         string // x86_64 or arm64
	Family       userdata.Family
	Owner        string
	Platform     string // "windows" or empty
	RootDevice   string
	WindowsBuild string
}

// alias is one mutable public parameter (".../recommended/image_id",
// ".../latest/image_id"): the parameter an AMI alias such as al2023@latest
// resolves through, and how to name the next release published under it.
type alias struct {
	path      string
	family    userdata.Family
	arch      string
	release   string
	name      func(release string) string
	versioned func(release string) string // "" when the family has no pinned parameters
	image     *image
}

// parameter is a public SSM parameter.
type parameter struct {
	Name     string
	Value    string
	Version  int64
	Modified time.Time
}

// imageCatalog holds the published images and parameters.
type imageCatalog struct {
	mu      sync.Mutex
	images  map[string]*image // by AMI ID
	params  map[string]*parameter
	aliases map[string]*alias // by mutable parameter name
}

// Releases published at start: the previous one (for pinned aliases such as
// al2023@v20250620) and the latest. The latest EKS release is the one the
// spot guide (test/testdata/seed-manifests/02) pins, al2023@v20250821.
var (
	linuxReleases        = []string{"v20250620", "v20250821"}
	bottlerocketReleases = []string{"1.41.0", "1.42.0"}
	windowsRelease       = "2025.07.09"
	windowsBuilds        = map[string]string{"2019": "10.0.17763", "2022": "10.0.20348"}
)

func amiID(name string) string {
	h := sha256.Sum256([]byte(name))
	return "ami-" + hex.EncodeToString(h[:])[:17]
}

func newImageCatalog(versions []string, now time.Time) *imageCatalog {
	c := &imageCatalog{images: map[string]*image{}, params: map[string]*parameter{}, aliases: map[string]*alias{}}
	for _, k8s := range versions {
		for _, av := range []struct{ arch, variant string }{
			{"x86_64", "standard"}, {"x86_64", "nvidia"}, {"x86_64", "neuron"}, {"arm64", "standard"}, {"arm64", "nvidia"},
		} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", k8s, av.arch, av.variant)
			name := func(rel string) string {
				return fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", av.arch, av.variant, k8s, rel)
			}
			c.addAlias(&alias{
				path: base + "recommended/image_id", family: userdata.AL2023, arch: av.arch, name: name,
				versioned: func(rel string) string { return base + name(rel) + "/image_id" },
			}, linuxReleases, now, func(rel string) *image {
				return &image{Name: name(rel), Arch: av.arch, Family: userdata.AL2023, Owner: ownerEKS, RootDevice: "/dev/xvda",
					Description: fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: %s)", k8s, av.variant)}
			})
		}
		for _, al := range []struct{ dir, prefix, arch string }{
			{"amazon-linux-2", "amazon-eks-node", "x86_64"},
			{"amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64"},
			{"amazon-linux-2-gpu", "amazon-eks-gpu-node", "x86_64"},
		} {
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/", k8s, al.dir)
			name := func(rel string) string { return fmt.Sprintf("%s-%s-%s", al.prefix, k8s, rel) }
			c.addAlias(&alias{
				path: base + "recommended/image_id", family: userdata.AL2, arch: al.arch, name: name,
				versioned: func(rel string) string { return base + name(rel) + "/image_id" },
			}, linuxReleases, now, func(rel string) *image {
				return &image{Name: name(rel), Arch: al.arch, Family: userdata.AL2, Owner: ownerEKS, RootDevice: "/dev/xvda",
					Description: fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", k8s)}
			})
		}
		for _, flavor := range []string{"aws-k8s-" + k8s, "aws-k8s-" + k8s + "-nvidia"} {
			for _, arch := range []string{"x86_64", "arm64"} {
				base := fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", flavor, arch)
				name := func(rel string) string {
					return fmt.Sprintf("bottlerocket-%s-%s-v%s-%s", flavor, arch, rel, amiID(flavor + arch + rel)[4:12])
				}
				c.addAlias(&alias{
					path: base + "latest/image_id", family: userdata.Bottlerocket, arch: arch, name: name,
					versioned: func(rel string) string { return base + rel + "/image_id" },
				}, bottlerocketReleases, now, func(rel string) *image {
					return &image{Name: name(rel), Arch: arch, Family: userdata.Bottlerocket, Owner: ownerBottlerocket, RootDevice: "/dev/xvda",
						Description: "bottlerocket " + flavor + " " + arch + " v" + rel}
				})
			}
		}
		for _, year := range []string{"2019", "2022"} {
			prefix := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s", year, k8s)
			name := func(rel string) string { return prefix + "-" + rel }
			c.addAlias(&alias{
				path: "/aws/service/ami-windows-latest/" + prefix + "/image_id", family: userdata.Windows, arch: "x86_64", name: name,
			}, []string{windowsRelease}, now, func(rel string) *image {
				return &image{Name: name(rel), Arch: "x86_64", Family: userdata.Windows, Owner: ownerWindows, Platform: "windows",
					RootDevice: "/dev/sda1", WindowsBuild: windowsBuilds[year],
					Description: fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and container orchestration with Kubernetes %s", year, k8s)}
			})
		}
	}
	return c
}

// addAlias publishes one image per release and points the alias at the last.
func (c *imageCatalog) addAlias(a *alias, releases []string, now time.Time, mk func(rel string) *image) {
	for _, rel := range releases {
		img := mk(rel)
		img.ID = amiID(img.Name)
		c.images[img.ID] = img
		if a.versioned != nil {
			c.params[a.versioned(rel)] = &parameter{Name: a.versioned(rel), Value: img.ID, Version: 1, Modified: now}
		}
		a.release, a.image = rel, img
	}
	c.params[a.path] = &parameter{Name: a.path, Value: a.image.ID, Version: 1, Modified: now}
	c.aliases[a.path] = a
}

// motoAMIs is the AMI list moto loads at start (MOTO_AMIS_PATH): moto's
// RegisterImage ignores the architecture, so images with the right
// architecture can only be created this way.
//
// creation_date is left out on purpose: moto parses it in place while
// loading the list for the first region, and loading it again for a second
// region then fails on the already-parsed value.
func (c *imageCatalog) motoAMIs() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.images))
	for id := range c.images {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		img := c.images[id]
		var platform any
		if img.Platform != "" {
			platform = img.Platform
		}
		out = append(out, map[string]any{
			"ami_id": img.ID, "name": img.Name, "description": img.Description, "owner_id": img.Owner,
			"public": true, "state": "available", "architecture": img.Arch, "platform": platform,
			"virtualization_type": "hvm", "hypervisor": "xen", "root_device_type": "ebs", "root_device_name": img.RootDevice,
			"image_type": "machine", "sriov": "simple", "image_location": "amazon/" + img.Name,
		})
	}
	return json.Marshal(out)
}

func (c *imageCatalog) image(id string) (*image, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	img, ok := c.images[id]
	return img, ok
}

func (c *imageCatalog) parameter(name string) (parameter, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.params[name]
	if !ok {
		return parameter{}, false
	}
	return *p, true
}

// parametersUnder lists the parameters below path, sorted by name; only
// direct children unless recursive.
func (c *imageCatalog) parametersUnder(path string, recursive bool) []parameter {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := strings.TrimSuffix(path, "/") + "/"
	var out []parameter
	for name, p := range c.params {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || (!recursive && strings.Contains(rest, "/")) {
			continue
		}
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nextRelease names the release after rel: the next day for dated
// releases, the next patch for Bottlerocket's semantic versions.
func nextRelease(family userdata.Family, rel string) string {
	switch family {
	case userdata.Bottlerocket:
		parts := strings.Split(rel, ".")
		n, _ := strconv.Atoi(parts[len(parts)-1])
		parts[len(parts)-1] = strconv.Itoa(n + 1)
		return strings.Join(parts, ".")
	case userdata.Windows:
		t, err := time.Parse("2006.01.02", rel)
		if err != nil {
			return rel + ".1"
		}
		return t.AddDate(0, 0, 1).Format("2006.01.02")
	}
	t, err := time.Parse("v20060102", rel)
	if err != nil {
		return rel + "1"
	}
	return t.AddDate(0, 0, 1).Format("v20060102")
}
