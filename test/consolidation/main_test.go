// Package consolidation tests, end to end, how Joiner removes and replaces
// nodes to save money: emptiness, underutilization, repacking many nodes,
// spot-to-spot, the safety of a replacement while pods are pending or
// arriving, and that a settled cluster stays settled. test/disruption holds
// the rest of disruption (conditions, budgets, drains, expiration); the two
// packages run in parallel.
package consolidation

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
