// Package safety tests, end to end, what keeps workloads safe while Joiner
// consolidates: capacity kept for pending pods, consolidation going on in
// a busy cluster, old nodes tainted before their replacements take pods,
// and every blocker `joiner explain node` names (PDBs, do-not-disrupt,
// budgets and their schedules, nominations). test/consolidation holds the
// moves themselves; the packages run in parallel, each on its own control
// plane.
package safety

import (
	"os"
	"testing"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
