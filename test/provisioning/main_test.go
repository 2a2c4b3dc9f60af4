// Package provisioning tests the joiner binary end to end on a real local
// control plane: pending pods become NodeClaims, kwok nodes and Running pods.
package provisioning

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
