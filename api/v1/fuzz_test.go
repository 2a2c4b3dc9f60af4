package v1

import (
	"encoding/json"
	"testing"
)

// FuzzNillableDuration: whatever a user writes in expireAfter,
// consolidateAfter or a budget's duration is parsed or refused with a
// message, never a panic; what is accepted reads back the same through
// String and JSON.
func FuzzNillableDuration(f *testing.F) {
	for _, s := range []string{"720h", "0s", "Never", "never", "30m", "1h30m", "-5m", "1.5h", "9223372036854775807ns", "99999999999h", "", " 5m", "5", "5mm"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseNillableDuration(s)
		if err != nil {
			return
		}
		again, err := ParseNillableDuration(d.String())
		if err != nil {
			t.Fatalf("%q parsed, but its String %q does not: %v", s, d.String(), err)
		}
		if d.IsNever() != again.IsNever() || (!d.IsNever() && *d.Duration != *again.Duration) {
			t.Fatalf("%q and its String %q differ: %v vs %v", s, d.String(), d, again)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back NillableDuration
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q marshals to %s, which does not unmarshal: %v", s, b, err)
		}
		if back.IsNever() != d.IsNever() || (!d.IsNever() && *back.Duration != *d.Duration) {
			t.Fatalf("%q round-trips through JSON as %v", s, back)
		}
	})
}
