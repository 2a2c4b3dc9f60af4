package catalog

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

func TestLookupCoversEveryType(t *testing.T) {
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1363 {
		t.Fatalf("%d names, want the catalog's 1363", len(names))
	}
	for _, n := range names {
		r, ok := Lookup(n)
		if !ok || r.Name != n || r.Labels["node.kubernetes.io/instance-type"] != n || r.Allocatable.Cpu().IsZero() {
			t.Fatalf("Lookup(%q) = %+v, %v", n, r, ok)
		}
	}
	if _, ok := Lookup("no.such-type"); ok {
		t.Error("Lookup found a type that does not exist")
	}
}

// OnDemandPrices must price exactly as InstanceTypes does, or the AWS
// provider's fallback and the kwok provider would rank plans differently.
func TestOnDemandPricesMatchInstanceTypes(t *testing.T) {
	for _, region := range []string{"us-east-1", "ap-northeast-2", "xx-nowhere-1"} {
		prices, err := OnDemandPrices(region)
		if err != nil {
			t.Fatal(err)
		}
		its, err := InstanceTypes(Options{Region: region})
		if err != nil {
			t.Fatal(err)
		}
		if len(prices) != len(its) {
			t.Fatalf("%s: %d prices for %d priced types", region, len(prices), len(its))
		}
		for _, it := range its {
			o, _ := it.CheapestOffering(func(o cloudprovider.Offering) bool { return o.CapacityType == v1.CapacityTypeOnDemand })
			if prices[it.Name] != o.Price {
				t.Fatalf("%s %s: OnDemandPrices %v, InstanceTypes %v", region, it.Name, prices[it.Name], o.Price)
			}
		}
	}
}
