// Package consolidation tests, end to end, how Joiner removes and replaces
// nodes to save money: the guides' scale-down, drift, spot-to-spot,
// repacking many nodes (-tags scale), and that a settled cluster stays
// settled. test/safety holds what keeps workloads safe meanwhile
// (emptiness and every blocker, pending and arriving pods, taints), and
// test/disruption the rest of disruption (conditions, budgets, drains,
// expiration); the packages run in parallel, each on its own control
// plane.
package consolidation

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
