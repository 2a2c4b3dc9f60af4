package instancetype

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

var updateSupplement = flag.Bool("update-supplement", false, "rewrite "+supplementTestdata+" from moto's records and the sibling rules")

// supplement is the file's form: the records, and for each where its
// numbers came from, so the table knows what it may compare.
type supplement struct {
	Records []ec2types.InstanceTypeInfo `json:"records"`
	Sources map[string]supplementSource `json:"sources"`
}

// supplementSource says which moto record a supplement record was inferred
// from and which labels were copied from the catalog (comparing those would
// test the catalog against itself).
type supplementSource struct {
	Sibling     string   `json:"sibling"`
	FromCatalog []string `json:"fromCatalog,omitempty"`
}

// siblingFamilies are, per family moto does not know, the families moto
// knows whose same size is taken to have the same vCPUs, memory, processor
// and network (ENIs per card, IPv4 per ENI, EFA), nearest first. A
// candidate is kept only when the pod count it gives equals the catalog's,
// the one number of the record the catalog states independently; a type no
// candidate fits stays unsourced. testdata/README.md gives the reasons.
var siblingFamilies = map[string][]string{
	// The d variant adds local NVMe to the b (EBS) and n (network) types.
	"m8idb": {"m8ib", "m8id"},
	"m8idn": {"m8in", "m8id"},
	"r8idb": {"r8ib", "r8id"},
	"r8idn": {"r8in", "r8id"},
	// Only the metal sizes are missing: each is its own family's
	// virtualized size of the same vCPUs (see metalSize).
	"m8ib": {"m8ib"}, "m8in": {"m8in"}, "r8ib": {"r8ib"}, "r8in": {"r8in"},
	// Graviton5 and the RTX PRO GPUs: the previous generation is the
	// nearest sibling, and it does not fit (see the README).
	"c9g": {"c8g"}, "c9gd": {"c8gd"}, "m9g": {"m8g"}, "m9gd": {"m8gd"},
	"g7": {"g6", "g6e"},
}

// catalogLabels are the labels a supplement record takes from the catalog
// because its sibling differs there (local disks, EBS bandwidth, and the
// hypervisor of a metal size).
var catalogLabels = []string{LabelInstanceLocalNVME, LabelInstanceEBSBandwidth, LabelInstanceHypervisor}

// metalSize is the virtualized size whose network a metal size shares:
// metal-48xl is 48xlarge. moto's own records bear the rule out
// (TestMetalSharesItsSizesNetwork).
func metalSize(size string) string {
	if n, ok := strings.CutPrefix(size, "metal-"); ok {
		return strings.TrimSuffix(n, "xl") + "xlarge"
	}
	return size
}

// buildSupplement infers a record for each catalog type moto lacks, and
// returns the types none could be inferred for with the reason.
func buildSupplement(moto []ec2types.InstanceTypeInfo) (supplement, map[string]string, error) {
	byName := map[string]ec2types.InstanceTypeInfo{}
	for _, info := range moto {
		byName[string(info.InstanceType)] = info
	}
	names, err := catalog.Names()
	if err != nil {
		return supplement{}, nil, err
	}
	out := supplement{Sources: map[string]supplementSource{}}
	left := map[string]string{}
	for _, name := range names {
		if _, ok := byName[name]; ok {
			continue
		}
		want, _ := catalog.Lookup(name)
		family, size, _ := strings.Cut(name, ".")
		var tried []string
		for _, sf := range siblingFamilies[family] {
			sibling := sf + "." + metalSize(size)
			base, ok := byName[sibling]
			if !ok {
				tried = append(tried, sibling+" (not in moto)")
				continue
			}
			info, from, err := inferRecord(name, base, want.Labels)
			if err != nil {
				return supplement{}, nil, err
			}
			got := podCount(info, familyOf(awsv1.AMIFamilyAL2023), &awsv1.KubeletConfiguration{}, 0, nil)
			if got != want.Allocatable.Pods().Value() {
				tried = append(tried, fmt.Sprintf("%s (%d pods, the catalog %d)", sibling, got, want.Allocatable.Pods().Value()))
				continue
			}
			out.Records = append(out.Records, info)
			out.Sources[name] = supplementSource{Sibling: sibling, FromCatalog: from}
			break
		}
		if _, ok := out.Sources[name]; !ok {
			if len(tried) == 0 {
				tried = append(tried, "no sibling family named")
			}
			left[name] = strings.Join(tried, "; ")
		}
	}
	return out, left, nil
}

// inferRecord is the sibling's record under the type's name, with the
// catalog's local disks, EBS bandwidth and hypervisor; it names the labels
// that thereby come from the catalog.
func inferRecord(name string, sibling ec2types.InstanceTypeInfo, labels map[string]string) (ec2types.InstanceTypeInfo, []string, error) {
	raw, err := json.Marshal(sibling)
	if err != nil {
		return ec2types.InstanceTypeInfo{}, nil, err
	}
	var info ec2types.InstanceTypeInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return ec2types.InstanceTypeInfo{}, nil, err
	}
	info.InstanceType = ec2types.InstanceType(name)
	var from []string
	for _, l := range catalogLabels {
		v, ok := labels[l]
		n, _ := strconv.ParseInt(v, 10, 64)
		switch l {
		case LabelInstanceLocalNVME:
			info.InstanceStorageInfo = nil
			if ok {
				info.InstanceStorageInfo = &ec2types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(n), NvmeSupport: ec2types.EphemeralNvmeSupportRequired}
			}
		case LabelInstanceEBSBandwidth:
			info.EbsInfo = nil
			if ok {
				info.EbsInfo = &ec2types.EbsInfo{EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault,
					EbsOptimizedInfo: &ec2types.EbsOptimizedInfo{MaximumBandwidthInMbps: aws.Int32(int32(n))}}
			}
		case LabelInstanceHypervisor:
			info.Hypervisor = ec2types.InstanceTypeHypervisor(v)
			info.BareMetal = aws.Bool(v == "")
		}
		from = append(from, l)
	}
	return info, from, nil
}

func encodeSupplement(s supplement) ([]byte, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(dropNulls(doc), "", " ")
	return append(b, '\n'), err
}

func readSupplement(t *testing.T) supplement {
	t.Helper()
	raw, err := os.ReadFile(supplementTestdata)
	if err != nil {
		t.Fatal(err)
	}
	var s supplement
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", supplementTestdata, err)
	}
	return s
}

// TestSupplementTestdata: the checked-in supplement is what the rules make
// from moto's records and the catalog, and the types it leaves out are
// exactly unsourced. With -update-supplement it rewrites the file:
//
//	go test ./pkg/cloudprovider/aws/instancetype -run TestSupplementTestdata -update-supplement -v
func TestSupplementTestdata(t *testing.T) {
	s, left, err := buildSupplement(readInfos(t, motoTestdata))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(left)) {
		t.Logf("unsourced %s: %s", name, left[name])
	}
	for _, r := range s.Records {
		t.Logf("inferred %s from %s", r.InstanceType, s.Sources[string(r.InstanceType)].Sibling)
	}
	if got := slices.Sorted(maps.Keys(left)); !slices.Equal(got, unsourced) {
		t.Errorf("the rules leave %d types unsourced, unsourced names %d:\n got: %v", len(got), len(unsourced), got)
	}
	enc, err := encodeSupplement(s)
	if err != nil {
		t.Fatal(err)
	}
	if *updateSupplement {
		if err := os.WriteFile(supplementTestdata, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	stored, err := os.ReadFile(supplementTestdata)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, stored) {
		t.Fatalf("%s is not what the rules make; rerun with -update-supplement", supplementTestdata)
	}
}

// TestMetalSharesItsSizesNetwork checks metalSize's rule on every metal
// type moto knows that has a virtualized size of the same name: the same
// ENIs per card and IPv4 addresses per ENI.
func TestMetalSharesItsSizesNetwork(t *testing.T) {
	byName := map[string]ec2types.InstanceTypeInfo{}
	for _, info := range readInfos(t, motoTestdata) {
		byName[string(info.InstanceType)] = info
	}
	checked := 0
	for name, info := range byName {
		family, size, _ := strings.Cut(name, ".")
		if !strings.HasPrefix(size, "metal-") {
			continue
		}
		virt, ok := byName[family+"."+metalSize(size)]
		if !ok {
			continue
		}
		checked++
		if a, b := network(info), network(virt); a != b {
			t.Errorf("%s has network %s, %s %s", name, a, virt.InstanceType, b)
		}
	}
	if checked == 0 {
		t.Fatal("no metal type with a virtualized size of its vCPUs")
	}
	t.Logf("%d metal types checked", checked)
}

func network(info ec2types.InstanceTypeInfo) string {
	n := info.NetworkInfo
	s := fmt.Sprintf("ipv4/eni %d, cards", aws.ToInt32(n.Ipv4AddressesPerInterface))
	for _, c := range n.NetworkCards {
		s += fmt.Sprintf(" %d:%d", aws.ToInt32(c.NetworkCardIndex), aws.ToInt32(c.MaximumNetworkInterfaces))
	}
	return s
}
