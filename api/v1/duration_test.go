package v1

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNillableDurationRoundTrip(t *testing.T) {
	cases := []struct {
		in      string
		never   bool
		want    time.Duration
		wantErr bool
	}{
		{in: `"720h"`, want: 720 * time.Hour},
		{in: `"0s"`, want: 0},
		{in: `"1h30m"`, want: 90 * time.Minute},
		{in: `"Never"`, never: true},
		{in: `null`, never: true},
		{in: `"30d"`, wantErr: true},
		{in: `42`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			var d NillableDuration
			err := json.Unmarshal([]byte(tc.in), &d)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want error, got %v", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.IsNever() != tc.never {
				t.Fatalf("IsNever = %v, want %v", d.IsNever(), tc.never)
			}
			if !tc.never && *d.Duration != tc.want {
				t.Fatalf("duration = %v, want %v", *d.Duration, tc.want)
			}
			// Writing back must give exactly what the user wrote, so that an
			// update never rewrites a user's spec.
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.in {
				t.Fatalf("round trip = %s, want %s", out, tc.in)
			}
			var cp NillableDuration
			d.DeepCopyInto(&cp)
			if cp.String() != d.String() || (d.Duration != nil && cp.Duration == d.Duration) {
				t.Fatalf("DeepCopyInto shares or loses state: %v vs %v", cp, d)
			}
		})
	}
}
