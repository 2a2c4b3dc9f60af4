//go:build scale

package scale

import (
	"os"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"

	"github.com/joiner-autoscaler/joiner/test/framework"
)

// A thousand kwok nodes renew their leases every 30 s rather than 10 s
// (localcluster.Options.NodeLease): this machine's apiserver could not
// take the kubelets' pace besides the rest.
func TestMain(m *testing.M) {
	os.Exit(framework.MainWith(m, localcluster.Options{NodeLease: 2 * time.Minute}))
}
