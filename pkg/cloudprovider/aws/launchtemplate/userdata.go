// The size of a class's user data, as Karpenter's gauge reports it.

package launchtemplate

import (
	"context"
	"encoding/base64"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// userDataLimit is EC2's cap on user data; userDataWarn is 90% of it.
const (
	userDataLimit = 16384
	userDataWarn  = userDataLimit * 9 / 10
)

// RecordUserData sets the class's user data size (base64 user data), as
// Karpenter's gauge karpenter_ec2nodeclasses_userdata_bytes.
func RecordUserData(ctx context.Context, class, userData string) {
	n := base64.StdEncoding.DecodedLen(len(userData))
	if raw, err := base64.StdEncoding.DecodeString(userData); err == nil {
		n = len(raw)
	}
	RecordUserDataSize(ctx, class, n)
}

// RecordUserDataSize sets the gauge to n decoded bytes, and warns near
// EC2's cap: a user's spec.userData that grows past it fails every launch.
// The class's validation records it before any launch, an oversized one
// too, as Karpenter's dry run does; each template made records it again.
func RecordUserDataSize(ctx context.Context, class string, n int) {
	metrics.EC2NodeClassUserDataBytes.WithLabelValues(class).Set(float64(n))
	if n >= userDataWarn {
		log.FromContext(ctx).Info("rendered user data is approaching the EC2 user data size limit",
			"EC2NodeClass", map[string]string{"name": class}, "userdata-bytes", n, "warn-threshold", userDataWarn, "limit", userDataLimit)
	}
}
