package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the duration literal that disables a timer such as expireAfter or
// consolidateAfter.
const Never = "Never"

// NillableDuration is a duration that may also be "Never". It keeps the text the
// user wrote, so that writing an object back never rewrites "720h" as
// "720h0m0s" and never changes what the user applied.
type NillableDuration struct {
	// Duration is nil for "Never" (and for an unset value).
	Duration *time.Duration
	raw      string
}

// MustParseNillableDuration parses s and panics on error; for tests and
// constants only.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses a Go duration string or "Never".
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{raw: s}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("invalid duration %q: want a duration such as 30s, 10m or 720h, or %q", s, Never)
	}
	return NillableDuration{Duration: &d, raw: s}, nil
}

// IsNever reports whether the timer is disabled.
func (d NillableDuration) IsNever() bool { return d.Duration == nil }

// String returns the text as written, or a canonical form.
func (d NillableDuration) String() string {
	switch {
	case d.raw != "":
		return d.raw
	case d.Duration == nil:
		return Never
	default:
		return d.Duration.String()
	}
}

// UnmarshalJSON accepts a duration string, "Never" or null.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	parsed, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

// MarshalJSON writes the duration back as the user wrote it.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.raw == "" && d.Duration == nil {
		return []byte("null"), nil
	}
	return json.Marshal(d.String())
}

// DeepCopyInto is hand-written because the unexported raw text must be kept.
func (d *NillableDuration) DeepCopyInto(out *NillableDuration) {
	*out = *d
	if d.Duration != nil {
		v := *d.Duration
		out.Duration = &v
	}
}
