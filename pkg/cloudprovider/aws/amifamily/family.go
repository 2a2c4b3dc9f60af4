// Package amifamily holds what differs between the AMI families an
// EC2NodeClass can name: how an alias finds its AMIs through SSM's public
// parameters, which AMIs a class's selector terms resolve to, the user data
// that makes an instance join the cluster, and the default block devices.
//
// It knows nothing of launch templates or instances; the launch template
// provider and the EC2NodeClass controller call into it.
package amifamily

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// Family is the AMI family in effect for a class: spec.amiFamily when set,
// else the family its alias names. Custom with an alias means "find the AMIs
// through the alias, but the user data is the user's own".
//
// The rule lives on the API type so that the class hash and this package
// cannot disagree on it.
func Family(nc *awsv1.EC2NodeClass) string {
	return nc.AMIFamily()
}

// AliasVersionLatest is the alias version that follows the newest release.
const AliasVersionLatest = "latest"

// Alias is a parsed "family@version" AMI selector.
type Alias struct {
	// Family is the AMI family constant (AMIFamilyAL2023, ...).
	Family string
	// Version is "latest" or a pinned release such as "v20240807".
	Version string
}

// String is the alias as the user wrote it, lower-case family.
func (a Alias) String() string {
	return strings.ToLower(a.Family) + "@" + a.Version
}

var aliasFamilies = map[string]string{
	"al2":          awsv1.AMIFamilyAL2,
	"al2023":       awsv1.AMIFamilyAL2023,
	"bottlerocket": awsv1.AMIFamilyBottlerocket,
	"windows2019":  awsv1.AMIFamilyWindows2019,
	"windows2022":  awsv1.AMIFamilyWindows2022,
	"windows2025":  awsv1.AMIFamilyWindows2025,
}

// ParseAlias parses "family@version". The CRD validates the same rules; they
// are checked again so that a class written before a validation change, or
// by a test, fails with a message and not with a wrong AMI.
func ParseAlias(s string) (Alias, error) {
	name, version, ok := strings.Cut(s, "@")
	if !ok || name == "" || version == "" {
		return Alias{}, fmt.Errorf("alias %q is improperly formatted, must match the format 'family@version'", s)
	}
	family, ok := aliasFamilies[strings.ToLower(name)]
	if !ok {
		return Alias{}, fmt.Errorf("alias %q: family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'", s)
	}
	if isWindows(family) && version != AliasVersionLatest {
		return Alias{}, fmt.Errorf("alias %q: windows families may only specify version 'latest'", s)
	}
	return Alias{Family: family, Version: version}, nil
}

// AliasOf returns the class's alias term, if it has one (validation keeps an
// alias alone in amiSelectorTerms).
func AliasOf(nc *awsv1.EC2NodeClass) (Alias, bool, error) {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			a, err := ParseAlias(t.Alias)
			return a, err == nil, err
		}
	}
	return Alias{}, false, nil
}

func isWindows(family string) bool {
	switch family {
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return true
	}
	return false
}

// windowsBuild is the node.kubernetes.io/windows-build label value of each
// Windows Server release, which kubelet sets and pods select on.
var windowsBuild = map[string]string{
	awsv1.AMIFamilyWindows2019: "10.0.17763",
	awsv1.AMIFamilyWindows2022: "10.0.20348",
	awsv1.AMIFamilyWindows2025: "10.0.26100",
}

// windowsYear is the Windows Server release in the family's SSM path.
var windowsYear = map[string]string{
	awsv1.AMIFamilyWindows2019: "2019",
	awsv1.AMIFamilyWindows2022: "2022",
	awsv1.AMIFamilyWindows2025: "2025",
}

// DefaultBlockDeviceMappings are the volumes a family's nodes get when the
// class lists none: a root volume large enough for images and logs, where
// the AMI's own snapshot size (2 to 8 GiB) would fill up. Bottlerocket keeps
// its OS on a small /dev/xvda and containers on /dev/xvdb. Custom gets none:
// the AMI's own mappings apply.
func DefaultBlockDeviceMappings(family string) []*awsv1.BlockDeviceMapping {
	ebs := func(size string) *awsv1.BlockDevice {
		q := resource.MustParse(size)
		encrypted := true
		volumeType := "gp3"
		return &awsv1.BlockDevice{Encrypted: &encrypted, VolumeType: &volumeType, VolumeSize: &q}
	}
	device := func(name string) *string { return &name }
	switch family {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023:
		return []*awsv1.BlockDeviceMapping{{DeviceName: device("/dev/xvda"), EBS: ebs("20Gi")}}
	case awsv1.AMIFamilyBottlerocket:
		return []*awsv1.BlockDeviceMapping{
			{DeviceName: device("/dev/xvda"), EBS: ebs("4Gi")},
			{DeviceName: device("/dev/xvdb"), EBS: ebs("20Gi")},
		}
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return []*awsv1.BlockDeviceMapping{{DeviceName: device("/dev/sda1"), EBS: ebs("50Gi")}}
	}
	return nil
}
