//go:build joinertest

package operator

import (
	"fmt"
	"time"
)

// The end-to-end tests build joiner with -tags joinertest (test/framework),
// so these variables exist in the binary under test and nowhere else: they
// shorten what a user has no reason to change.
func init() {
	testHooks = func(o *Options, getenv func(string) string) error {
		if v := getenv("JOINER_TEST_UNAVAILABLE_TTL"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("invalid test setting JOINER_TEST_UNAVAILABLE_TTL %q: want a positive duration such as 30s", v)
			}
			o.UnavailableTTL = d
		}
		if v := getenv("JOINER_TEST_PRICE_RETRY"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("invalid test setting JOINER_TEST_PRICE_RETRY %q: want a positive duration such as 2s", v)
			}
			o.PriceRetryInterval = d
		}
		if v := getenv("JOINER_TEST_REPAIR_TOLERATION"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("invalid test setting JOINER_TEST_REPAIR_TOLERATION %q: want a positive duration such as 30s", v)
			}
			o.RepairToleration = d
		}
		return nil
	}
}
