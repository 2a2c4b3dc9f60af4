package instance

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// countLaunchFailure counts one offering a fleet could not launch in
// karpenter_cloudprovider_instance_launch_failures_total, by its zone,
// zone ID (from the request's overrides: EC2's error names the zone, not
// its ID), capacity type and reason.
func countLaunchFailure(e ec2types.CreateFleetError, req Request) {
	zone := errorZone(e, req.Overrides)
	zoneID := ""
	for _, o := range req.Overrides {
		if o.Zone == zone && o.ZoneID != "" {
			zoneID = o.ZoneID
			break
		}
	}
	reason := LaunchFailureReason(aws.ToString(e.ErrorCode) + ": " + aws.ToString(e.ErrorMessage))
	metrics.InstanceLaunchFailures.WithLabelValues(zone, zoneID, req.CapacityType, reason).Inc()
}

// launchReasons are the reason label's values, Karpenter's, by the text of
// the EC2 error that gives them, most specific first; anything else is
// "LaunchFailed".
var launchReasons = []struct{ text, reason string }{
	{"AuthFailure.ServiceLinkedRoleCreationNotPermitted", "SpotSLRCreationFailed"},
	{"Not authorized for images", "AMIAuthorizationFailure"},
	{"UnauthorizedOperation", "Unauthorized"},
	{"AccessDenied", "Unauthorized"},
	{"AuthFailure", "Unauthorized"},
	{"belong to different networks", "SecurityGroupSubnetVPCMismatch"},
	{"iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"},
	{"InvalidLaunchTemplateId.NotFound", "LaunchTemplateNotFound"},
	{"User data is limited to", "UserDataSizeLimitExceeded"},
	{"InvalidAMIID.Malformed", "InvalidAMIID"},
	{"InvalidAMIID.NotFound", "AMINotFound"},
	{"RequestLimitExceeded", "RequestLimitExceeded"},
	{"InternalError", "InternalError"},
	{"not eligible for Free Tier", "FreeTierIneligible"},
	{"MaxFleetCountExceeded", "FleetQuotaExceeded"},
	{"PendingVerification", "AccountPendingVerification"},
	{"MaxSpotInstanceCountExceeded", "SpotQuotaExceeded"},
	{"VcpuLimitExceeded", "VCPULimitExceeded"},
	{"InsufficientFreeAddressesInSubnet", "InsufficientFreeAddressesInSubnet"},
}

// LaunchFailureReason is the reason label of a launch failure's error text.
func LaunchFailureReason(text string) string {
	for _, r := range launchReasons {
		if strings.Contains(text, r.text) {
			return r.reason
		}
	}
	return "LaunchFailed"
}
