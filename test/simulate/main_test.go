// Package simulate checks joiner simulate against a live cluster: `joiner
// simulate record` recording the local control plane, and (with -tags
// fidelity, make simulate-fidelity) one trace replayed live, with kwok
// and Joiner, and in the simulator, with the figures compared.
package simulate

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
