//go:build fidelity

// Package simulate measures joiner simulate's fidelity (make
// simulate-fidelity): one trace replayed live, on the local control plane
// with kwok and Joiner, and in the simulator, with the figures compared.
package simulate

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
