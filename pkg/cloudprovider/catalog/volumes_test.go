package catalog

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/volumes"
)

func TestEBSAttachLimits(t *testing.T) {
	its, err := InstanceTypes(Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for _, it := range its {
		byName[it.Name] = it.AttachLimits[volumes.EBSDriver]
	}
	for name, want := range map[string]int{
		"m5.large":        26, // shared Nitro: 28 less an interface and the root volume
		"m5.metal":        26,
		"c6gd.xlarge":     26,
		"m7i.large":       31, // dedicated: 32 less the root volume
		"c7i-flex.xlarge": 31,
		"m7i.16xlarge":    47,
		"r7i.48xlarge":    127,
		"m7i.metal-24xl":  38,
		"m7i.metal-48xl":  78,
		"t2.micro":        38, // Xen: 39 less the root volume
		"m4.large":        38,
	} {
		got, ok := byName[name]
		if !ok {
			t.Errorf("%s is not in the catalog", name)
			continue
		}
		if got != want {
			t.Errorf("%s: EBS attach limit %d, want %d", name, got, want)
		}
	}
	for _, it := range its {
		if it.AttachLimits[volumes.EBSDriver] <= 0 {
			t.Errorf("%s has no EBS attach limit", it.Name)
		}
	}
}
