package operator

import (
	"strings"
	"testing"
	"time"
)

// TestUnavailableTTLIsTestOnly: the product binary has no knob for the
// capacity cache's TTL, as Karpenter has none; the test binary reads one.
// go test -tags joinertest runs the test build's half.
func TestUnavailableTTLIsTestOnly(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        time.Duration
		wantErr     string
	}{
		{"unset", "", 0, ""},
		{"set", "20s", 20 * time.Second, ""},
		{"bad", "soon", 0, "JOINER_TEST_UNAVAILABLE_TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"JOINER_TEST_UNAVAILABLE_TTL": tc.value}
			o, err := Parse(nil, func(k string) string { return env[k] })
			if testHooks == nil {
				// A product build ignores the variable, whatever it holds.
				if err != nil || o.UnavailableTTL != 0 {
					t.Fatalf("product build: UnavailableTTL %v, error %v; want the variable ignored", o, err)
				}
				return
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || o.UnavailableTTL != tc.want {
				t.Fatalf("UnavailableTTL %v, error %v; want %v", o.UnavailableTTL, err, tc.want)
			}
		})
	}
}
