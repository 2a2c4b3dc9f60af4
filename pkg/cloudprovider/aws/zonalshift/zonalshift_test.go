package zonalshift

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

type fakeARC struct {
	shifts []arctypes.ZonalShiftInResource
	err    error
	asked  string
}

func (f *fakeARC) GetManagedResource(_ context.Context, in *arczonalshift.GetManagedResourceInput, _ ...func(*arczonalshift.Options)) (*arczonalshift.GetManagedResourceOutput, error) {
	f.asked = aws.ToString(in.ResourceIdentifier)
	if f.err != nil {
		return nil, f.err
	}
	return &arczonalshift.GetManagedResourceOutput{ZonalShifts: f.shifts}, nil
}

// Only applied, unexpired shifts take a zone away; an expired one stops
// counting by itself; a failed read keeps what was known.
func TestShifted(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	shift := func(zone string, applied arctypes.AppliedStatus, expiresIn time.Duration) arctypes.ZonalShiftInResource {
		return arctypes.ZonalShiftInResource{AwayFrom: aws.String(zone), AppliedStatus: applied, ExpiryTime: aws.Time(now.Add(expiresIn))}
	}
	cases := []struct {
		name   string
		shifts []arctypes.ZonalShiftInResource
		// after, when set, moves the clock on before asking.
		after time.Duration
		want  map[string]bool
	}{
		{"none", nil, 0, map[string]bool{}},
		{"applied", []arctypes.ZonalShiftInResource{shift("use1-az1", arctypes.AppliedStatusApplied, time.Hour)}, 0, map[string]bool{"use1-az1": true}},
		{"not applied", []arctypes.ZonalShiftInResource{shift("use1-az1", arctypes.AppliedStatusNotApplied, time.Hour)}, 0, map[string]bool{}},
		{"expired since it was read", []arctypes.ZonalShiftInResource{shift("use1-az1", arctypes.AppliedStatusApplied, time.Minute)}, 2 * time.Minute, map[string]bool{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			api := &fakeARC{shifts: tc.shifts}
			p := &Provider{API: api, ClusterARN: "arn:aws:eks:us-east-1:123456789012:cluster/demo", Clock: clk, Log: logr.Discard()}
			if err := p.Update(context.Background()); err != nil {
				t.Fatal(err)
			}
			if api.asked != p.ClusterARN {
				t.Errorf("asked about %q, want the cluster's ARN", api.asked)
			}
			clk.Step(tc.after)
			if got := p.Shifted(); !maps.Equal(got, tc.want) {
				t.Errorf("shifted %v, want %v", got, tc.want)
			}
			api.err = errors.New("throttled")
			if err := p.Update(context.Background()); err == nil {
				t.Error("a failed read is no error")
			}
			if got := p.Shifted(); !maps.Equal(got, tc.want) {
				t.Errorf("after a failed read: shifted %v, want %v kept", got, tc.want)
			}
		})
	}
}

// OnChange hears each change once, with the zones before and after.
func TestOnChange(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	api := &fakeARC{}
	var heard [][2]map[string]bool
	p := &Provider{API: api, ClusterARN: "arn", Clock: clocktesting.NewFakeClock(now), Log: logr.Discard(),
		OnChange: func(_ context.Context, before, after map[string]bool) {
			heard = append(heard, [2]map[string]bool{before, after})
		}}
	for _, shifts := range [][]arctypes.ZonalShiftInResource{
		nil,
		{{AwayFrom: aws.String("use1-az1"), AppliedStatus: arctypes.AppliedStatusApplied, ExpiryTime: aws.Time(now.Add(time.Hour))}},
		{{AwayFrom: aws.String("use1-az1"), AppliedStatus: arctypes.AppliedStatusApplied, ExpiryTime: aws.Time(now.Add(time.Hour))}},
		nil,
	} {
		api.shifts = shifts
		if err := p.Update(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.notify(context.Background())
	}
	if len(heard) != 2 || !heard[0][1]["use1-az1"] || !heard[1][0]["use1-az1"] || len(heard[1][1]) != 0 {
		t.Fatalf("heard %v, want the shift then its end", heard)
	}
}
