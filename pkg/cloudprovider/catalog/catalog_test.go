package catalog

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

func TestInstanceTypes(t *testing.T) {
	cases := []struct {
		name       string
		opts       Options
		typ        string
		zone       string
		wantOD     float64
		wantZones  int
		wantRegion string
	}{
		{name: "default region", typ: "c5a.2xlarge", zone: "us-east-1a", wantOD: 0.308, wantZones: 3, wantRegion: "us-east-1"},
		{name: "other region is scaled", opts: Options{Region: "ap-northeast-2", Zones: []string{"ap-northeast-2a"}}, typ: "c5a.2xlarge", zone: "ap-northeast-2a", wantOD: 0.3696, wantZones: 1, wantRegion: "ap-northeast-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			its, err := InstanceTypes(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(its) < 1300 {
				t.Fatalf("only %d priced types", len(its))
			}
			for _, it := range its {
				if it.Name != tc.typ {
					continue
				}
				if got := it.Labels[LabelRegion]; got != tc.wantRegion {
					t.Errorf("region label %q, want %q", got, tc.wantRegion)
				}
				if len(it.Offerings) != 2*tc.wantZones {
					t.Errorf("%d offerings, want %d", len(it.Offerings), 2*tc.wantZones)
				}
				for _, o := range it.Offerings {
					switch o.CapacityType {
					case v1.CapacityTypeOnDemand:
						if o.Price != tc.wantOD {
							t.Errorf("on-demand %v, want %v", o.Price, tc.wantOD)
						}
					case v1.CapacityTypeSpot:
						if o.Price < tc.wantOD*SpotMinFraction-1e-4 || o.Price > tc.wantOD*(SpotMinFraction+SpotFractionSpan)+1e-4 {
							t.Errorf("spot %v outside the model for on-demand %v", o.Price, tc.wantOD)
						}
						if o.Price != SpotPrice(tc.typ, o.Zone, tc.wantOD) {
							t.Errorf("spot price is not deterministic")
						}
					}
				}
				if it.Capacity.Cpu().Value() != 8 || it.Allocatable.Cpu().MilliValue() >= 8000 {
					t.Errorf("capacity %v allocatable %v", it.Capacity.Cpu(), it.Allocatable.Cpu())
				}
				return
			}
			t.Fatalf("%s not in catalog", tc.typ)
		})
	}
}
