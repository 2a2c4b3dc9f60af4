package operator

import (
	"strings"
	"testing"
	"time"
)

// TestTestOnlySettings: the product binary has no knob for the capacity
// cache's TTL or the price refresh's retry, as Karpenter has none; the test
// binary reads one for each. go test -tags joinertest runs the test build's
// half.
func TestTestOnlySettings(t *testing.T) {
	unavailableTTL := func(o *Options) time.Duration { return o.UnavailableTTL }
	priceRetry := func(o *Options) time.Duration { return o.PriceRetryInterval }
	repairToleration := func(o *Options) time.Duration { return o.RepairToleration }
	for _, tc := range []struct {
		name, variable, value string
		field                 func(*Options) time.Duration
		want                  time.Duration
		wantErr               string
	}{
		{"unavailable TTL unset", "JOINER_TEST_UNAVAILABLE_TTL", "", unavailableTTL, 0, ""},
		{"unavailable TTL set", "JOINER_TEST_UNAVAILABLE_TTL", "20s", unavailableTTL, 20 * time.Second, ""},
		{"unavailable TTL bad", "JOINER_TEST_UNAVAILABLE_TTL", "soon", unavailableTTL, 0, "JOINER_TEST_UNAVAILABLE_TTL"},
		{"price retry unset", "JOINER_TEST_PRICE_RETRY", "", priceRetry, 0, ""},
		{"price retry set", "JOINER_TEST_PRICE_RETRY", "2s", priceRetry, 2 * time.Second, ""},
		{"price retry bad", "JOINER_TEST_PRICE_RETRY", "soon", priceRetry, 0, "JOINER_TEST_PRICE_RETRY"},
		{"price retry not positive", "JOINER_TEST_PRICE_RETRY", "0s", priceRetry, 0, "JOINER_TEST_PRICE_RETRY"},
		{"repair toleration set", "JOINER_TEST_REPAIR_TOLERATION", "30s", repairToleration, 30 * time.Second, ""},
		{"repair toleration bad", "JOINER_TEST_REPAIR_TOLERATION", "-1s", repairToleration, 0, "JOINER_TEST_REPAIR_TOLERATION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{tc.variable: tc.value}
			o, err := Parse(nil, func(k string) string { return env[k] })
			if testHooks == nil {
				// A product build ignores the variable, whatever it holds.
				if err != nil || tc.field(o) != 0 {
					t.Fatalf("product build: %s gave %v, error %v; want the variable ignored", tc.variable, tc.field(o), err)
				}
				return
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || tc.field(o) != tc.want {
				t.Fatalf("%s=%q gave %v, error %v; want %v", tc.variable, tc.value, tc.field(o), err, tc.want)
			}
		})
	}
}
