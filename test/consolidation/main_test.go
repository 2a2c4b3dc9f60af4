// Package consolidation tests, end to end, how Joiner removes and replaces
// nodes to save money: the guides' scale-down, emptiness and every blocker
// `joiner explain node` names, drift, spot-to-spot, repacking many nodes
// (-tags scale), the safety of a replacement while pods are pending or
// arriving, and that a settled cluster stays settled. test/disruption
// holds the rest of disruption (conditions, budgets, drains, expiration);
// the packages run in parallel, each on its own control plane.
package consolidation

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
