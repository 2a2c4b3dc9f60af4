package launchtemplate

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/joiner-autoscaler/joiner/pkg/metrics"
)

// karpenter_ec2nodeclasses_userdata_bytes (Karpenter v1.14.1's name) is the
// decoded size of the user data of the class's newest template, and goes
// with the class's templates.
func TestUserDataBytes(t *testing.T) {
	motoEC2 := reset(t)
	ctx := context.Background()
	p := New(motoEC2, "demo", nil, 0)
	cases := []struct {
		name     string
		userData string
	}{
		{"a short script", "#!/bin/bash\n"},
		{"a long script", "#!/bin/bash\n" + strings.Repeat("echo joiner\n", 300)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input()
			in.NodeClassName = "sized"
			in.UserData = base64.StdEncoding.EncodeToString([]byte(tc.userData))
			if _, err := p.Ensure(ctx, in); err != nil {
				t.Fatal(err)
			}
			if got := testutil.ToFloat64(metrics.EC2NodeClassUserDataBytes.WithLabelValues("sized")); got != float64(len(tc.userData)) {
				t.Errorf("userdata_bytes %v, want %d", got, len(tc.userData))
			}
		})
	}
	if err := p.DeleteForNodeClass(ctx, "sized"); err != nil {
		t.Fatal(err)
	}
	// Other tests' classes have series of their own; this class's is gone.
	if metrics.EC2NodeClassUserDataBytes.DeleteLabelValues("sized") {
		t.Error("the class's series outlived its templates")
	}
}
