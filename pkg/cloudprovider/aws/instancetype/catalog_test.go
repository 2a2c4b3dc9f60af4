package instancetype

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// supplementTestdata holds DescribeInstanceTypes records for catalog types
// moto does not know, inferred from a sibling moto knows
// (TestSupplementTestdata writes it); testdata/README.md says where each
// number comes from.
const supplementTestdata = "testdata/supplement-describe-instance-types.json"

// TestAllocatableMatchesCatalog computes every catalog type from EC2's
// record of it under the defaults (AL2023, no kubelet overrides, 7.5% VM
// overhead, no reserved ENIs) and wants the catalog's labels and
// allocatable exactly. A supplement record's labels that were copied from
// the catalog are not compared: they would agree by construction.
func TestAllocatableMatchesCatalog(t *testing.T) {
	infos := map[string]ec2types.InstanceTypeInfo{}
	for _, info := range readInfos(t, motoTestdata) {
		infos[string(info.InstanceType)] = info
	}
	supp := readSupplement(t)
	for _, info := range supp.Records {
		if _, dup := infos[string(info.InstanceType)]; dup {
			t.Errorf("%s is in both moto's records and the supplement", info.InstanceType)
		}
		if _, ok := supp.Sources[string(info.InstanceType)]; !ok {
			t.Errorf("%s is in the supplement without its source", info.InstanceType)
		}
		infos[string(info.InstanceType)] = info
	}
	names, err := catalog.Names()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	compared := 0
	for _, name := range names {
		info, ok := infos[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		compared++
		t.Run(name, func(t *testing.T) {
			want, _ := catalog.Lookup(name)
			labels, _, alloc, err := Compute(info, Inputs{AMIFamily: awsv1.AMIFamilyAL2023, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent})
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := maps.Clone(want.Labels)
			for _, l := range supp.Sources[name].FromCatalog {
				delete(labels, l)
				delete(wantLabels, l)
			}
			if !maps.Equal(labels, wantLabels) {
				t.Errorf("labels differ:\n%s", diffLabels(labels, wantLabels))
			}
			if d := diffResources(alloc, want.Allocatable); d != "" {
				t.Errorf("allocatable differs:\n%s", d)
			}
		})
	}
	if !slices.Equal(missing, unsourced) {
		t.Errorf("catalog types without a record: %d, want the %d named in unsourced\n got: %v", len(missing), len(unsourced), missing)
	}
	t.Logf("compared %d of %d catalog types (%d inferred from a sibling); %d have no sourced record", compared, len(names), len(supp.Records), len(missing))
}

// unsourced are the catalog types with no DescribeInstanceTypes record:
// moto 5.2.1 does not know them, their ENIs per network card and IPv4
// addresses per ENI are in no public source found, and the nearest sibling
// moto knows gives another pod count than the catalog's
// (siblingFamilies; testdata/README.md).
var unsourced = strings.Fields(`
	c9g.12xlarge c9g.16xlarge c9g.24xlarge c9g.2xlarge c9g.48xlarge c9g.4xlarge c9g.8xlarge c9g.large c9g.medium c9g.metal-48xl c9g.xlarge
	c9gd.12xlarge c9gd.16xlarge c9gd.24xlarge c9gd.2xlarge c9gd.48xlarge c9gd.4xlarge c9gd.8xlarge c9gd.large c9gd.medium c9gd.metal-48xl c9gd.xlarge
	g7.12xlarge g7.24xlarge g7.2xlarge g7.48xlarge g7.4xlarge g7.8xlarge
	m9g.12xlarge m9g.16xlarge m9g.24xlarge m9g.2xlarge m9g.48xlarge m9g.4xlarge m9g.8xlarge m9g.large m9g.medium m9g.metal-48xl m9g.xlarge
	m9gd.12xlarge m9gd.16xlarge m9gd.24xlarge m9gd.2xlarge m9gd.48xlarge m9gd.4xlarge m9gd.8xlarge m9gd.large m9gd.medium m9gd.metal-48xl m9gd.xlarge
`)

func diffLabels(got, want map[string]string) string {
	var b strings.Builder
	keys := slices.Sorted(maps.Keys(got))
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if g != w || gok != wok {
			fmt.Fprintf(&b, "  %s: got %q (%v), want %q (%v)\n", k, g, gok, w, wok)
		}
	}
	return b.String()
}

func diffResources(got, want corev1.ResourceList) string {
	var b strings.Builder
	keys := map[corev1.ResourceName]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		g, gok := got[k]
		w, wok := want[k]
		if gok != wok || g.Cmp(w) != 0 {
			fmt.Fprintf(&b, "  %s: got %s (%v), want %s (%v)\n", k, g.String(), gok, w.String(), wok)
		}
	}
	return b.String()
}
