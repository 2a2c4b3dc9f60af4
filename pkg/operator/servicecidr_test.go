package operator

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// An IPv6 cluster reports only serviceIpv6Cidr: nodes must get it, or
// AL2023's nodeadm has no cidr and they never join.
func TestServiceCIDR(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *ekstypes.KubernetesNetworkConfigResponse
		want string
	}{
		{"no network config", nil, ""},
		{"IPv4", &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv4Cidr: aws.String("10.100.0.0/16"), IpFamily: ekstypes.IpFamilyIpv4}, "10.100.0.0/16"},
		{"IPv6", &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv6Cidr: aws.String("fd30:1c53:5f8a::/108"), IpFamily: ekstypes.IpFamilyIpv6}, "fd30:1c53:5f8a::/108"},
	} {
		if got := serviceCIDR(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
