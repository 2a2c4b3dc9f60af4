package catalog

import (
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/volumes"
)

// The catalog data has no EBS attachment limit, so it is derived from the
// public EC2 rules ("Amazon EBS volume limits for Amazon EC2 instances")
// as the EBS CSI driver applies them on a fresh node, which has one network
// interface and a root volume:
//   - types with a dedicated EBS limit (listed below) get the limit of
//     their size, less the root volume: 31 up to 12xlarge, then 47, 63, 87
//     and 127, and 38 or 78 for the large metal sizes;
//   - other Nitro types (and bare metal) share 28 attachments between EBS
//     volumes, network interfaces and NVMe instance-store disks: 28 less
//     the interface and the root volume, 26 (the disks of types with local
//     NVMe are not counted: the data does not say how many there are);
//   - Xen types take up to 39 volumes besides the root device: 38.
//
// A node's CSINode reports the driver's own count once it registers, and
// that count wins. The AWS provider fills the limit from
// DescribeInstanceTypes instead.
const (
	nitroSharedAttachments = 28
	xenAttachments         = 39
	// rootVolume and bootInterface are what a fresh node already uses.
	rootVolume    = 1
	bootInterface = 1
)

// dedicatedEBSFamilies have an EBS volume limit of their own, not shared
// with network interfaces or instance-store disks.
var dedicatedEBSFamilies = map[string]bool{
	"m7a": true, "m7i": true, "m7i-flex": true, "m8g": true,
	"c7a": true, "c7i": true, "c7i-flex": true, "c8g": true,
	"r7a": true, "r7i": true, "r7iz": true, "r8g": true, "x8g": true,
	"u7i-6tb": true, "u7i-8tb": true, "u7i-12tb": true, "u7in-16tb": true, "u7in-24tb": true, "u7in-32tb": true,
	"i7ie": true, "i8g": true,
	"f2": true, "g6": true, "g6e": true, "gr6": true, "p5": true, "p5e": true, "p5en": true, "trn2": true,
	"hpc7a": true,
}

// dedicatedBySize is the dedicated limit per size; sizes not listed (up to
// 12xlarge) get 32.
var dedicatedBySize = map[string]int{
	"16xlarge": 48, "24xlarge": 64, "32xlarge": 88, "48xlarge": 128,
	"metal-16xl": 39, "metal-24xl": 39, "metal-32xl": 79, "metal-48xl": 79,
}

// ebsAttachLimit is how many EBS volumes a new node of the type can attach.
func ebsAttachLimit(labels map[string]string) int {
	family, size := labels["karpenter.k8s.aws/instance-family"], labels["karpenter.k8s.aws/instance-size"]
	switch {
	case dedicatedEBSFamilies[family]:
		limit, ok := dedicatedBySize[size]
		if !ok {
			limit = 32
		}
		return limit - rootVolume
	case strings.EqualFold(labels["karpenter.k8s.aws/instance-hypervisor"], "xen"):
		return xenAttachments - rootVolume
	default:
		return nitroSharedAttachments - bootInterface - rootVolume
	}
}

// attachLimits are the instance type's attach limits per CSI driver.
func attachLimits(labels map[string]string) map[string]int {
	return map[string]int{volumes.EBSDriver: ebsAttachLimit(labels)}
}
