// Package disruption tests, end to end, how Joiner marks and removes nodes:
// consolidatable and drifted NodeClaims, and expiration.
package disruption

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
