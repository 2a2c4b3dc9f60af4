package instancetype

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/unavailable"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
)

func nodeClass(zones ...string) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	for i, z := range zones {
		nc.Status.Subnets = append(nc.Status.Subnets, awsv1.Subnet{ID: fmt.Sprintf("subnet-%d", i), Zone: z})
	}
	return nc
}

func byName(its []*cloudprovider.InstanceType) map[string]*cloudprovider.InstanceType {
	out := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}

func offeringKeys(it *cloudprovider.InstanceType) []string {
	var keys []string
	for _, o := range it.Offerings {
		keys = append(keys, o.Zone+"/"+o.CapacityType)
	}
	sort.Strings(keys)
	return keys
}

// catalogPricing prices from the embedded catalog only, so the expected
// prices are known.
func catalogPricing(clk *clocktesting.FakeClock) *pricing.Provider {
	return pricing.New(pricing.Options{Region: "us-east-1", Isolated: true, Clock: clk})
}

// TestListFromMoto lists moto's us-east-1 types for a class with subnets in
// us-east-1a and us-east-1b (twice) and in a zone EC2 does not have.
func TestListFromMoto(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p := New(Options{EC2: mototest.Clients(t, "").EC2, Region: "us-east-1", Pricing: catalogPricing(clk), VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clk})
	its, err := p.List(context.Background(), nodeClass("us-east-1b", "us-east-1a", "us-east-1b", "us-east-1z"))
	if err != nil {
		t.Fatal(err)
	}
	// moto knows 1263 types; the 8 Mac types have architectures Kubernetes
	// does not run (x86_64_mac, arm64_mac). t2.micro lists [i386, x86_64].
	if len(its) != 1255 {
		t.Errorf("%d types, want 1255", len(its))
	}
	if !slices.IsSortedFunc(its, func(a, b *cloudprovider.InstanceType) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("types are not sorted by name")
	}
	for _, it := range its {
		if it.Labels["topology.kubernetes.io/region"] != "us-east-1" || it.AttachLimits[volumes.EBSDriver] == 0 {
			t.Fatalf("%s: region label %q, attach limits %v", it.Name, it.Labels["topology.kubernetes.io/region"], it.AttachLimits)
		}
	}
	od := func(it string) float64 {
		prices, _ := catalog.OnDemandPrices("us-east-1")
		return prices[it]
	}
	got := byName(its)
	for _, tc := range []struct {
		name, typ string
		offerings []string // zone/capacity-type, sorted
	}{
		{"both capacity types in both zones", "m5.large", []string{"us-east-1a/on-demand", "us-east-1a/spot", "us-east-1b/on-demand", "us-east-1b/spot"}},
		{"only the zones that offer the type", "g7e.2xlarge", []string{"us-east-1a/on-demand", "us-east-1a/spot"}},
		{"no spot where the type has no spot", "c8ine.large", []string{"us-east-1a/on-demand", "us-east-1b/on-demand"}},
		{"no zone offers it: listed without offerings", "hpc7a.96xlarge", nil},
		{"a type that also lists i386", "t2.micro", []string{"us-east-1a/on-demand", "us-east-1a/spot", "us-east-1b/on-demand", "us-east-1b/spot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := got[tc.typ]
			if !ok {
				t.Fatalf("%s not listed", tc.typ)
			}
			if keys := offeringKeys(it); !slices.Equal(keys, tc.offerings) {
				t.Fatalf("offerings %v, want %v", keys, tc.offerings)
			}
			for _, o := range it.Offerings {
				want := od(tc.typ)
				if o.CapacityType == v1.CapacityTypeSpot {
					want = catalog.SpotPrice(tc.typ, o.Zone, want)
				}
				if o.Price != want || !o.Available {
					t.Errorf("%s/%s: price %v available %v, want %v and available", o.Zone, o.CapacityType, o.Price, o.Available, want)
				}
			}
		})
	}
	if _, ok := got["mac1.metal"]; ok {
		t.Error("mac1.metal listed")
	}
}

func offering(t *testing.T, its []*cloudprovider.InstanceType, typ, zone, ct string) cloudprovider.Offering {
	t.Helper()
	for _, it := range its {
		if it.Name != typ {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == ct {
				return o
			}
		}
	}
	t.Fatalf("no offering %s %s %s", typ, zone, ct)
	return cloudprovider.Offering{}
}

// fakeEC2 describes a few of moto's records in pages of one, and counts
// and fails calls on demand.
type fakeEC2 struct {
	mu       sync.Mutex
	infos    []ec2types.InstanceTypeInfo
	zones    map[string][]string
	err      error
	describe int
	attempts int // first pages asked for, answered or not
	// onCall, when set, runs at each first page before it is answered,
	// outside the lock.
	onCall func()
}

func (f *fakeEC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	if in.NextToken == nil {
		f.mu.Lock()
		onCall := f.onCall
		f.mu.Unlock()
		if onCall != nil {
			onCall()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.NextToken == nil {
		f.attempts++
	}
	if f.err != nil {
		return nil, f.err
	}
	i := 0
	if in.NextToken != nil {
		fmt.Sscanf(*in.NextToken, "%d", &i)
	} else {
		f.describe++
	}
	out := &ec2.DescribeInstanceTypesOutput{InstanceTypes: f.infos[i : i+1]}
	if i+1 < len(f.infos) {
		out.NextToken = aws.String(fmt.Sprint(i + 1))
	}
	return out, nil
}

func (f *fakeEC2) DescribeInstanceTypeOfferings(_ context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if in.LocationType != ec2types.LocationTypeAvailabilityZone {
		return nil, fmt.Errorf("location type %q", in.LocationType)
	}
	var all []ec2types.InstanceTypeOffering
	for _, it := range slices.Sorted(func(yield func(string) bool) {
		for k := range f.zones {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, z := range f.zones[it] {
			all = append(all, ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(it), Location: aws.String(z), LocationType: in.LocationType})
		}
	}
	// Pages of two.
	i := 0
	if in.NextToken != nil {
		fmt.Sscanf(*in.NextToken, "%d", &i)
	}
	end := min(i+2, len(all))
	out := &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: all[i:end]}
	if end < len(all) {
		out.NextToken = aws.String(fmt.Sprint(end))
	}
	return out, nil
}

func (f *fakeEC2) set(err error, infos ...ec2types.InstanceTypeInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	if infos != nil {
		f.infos = infos
	}
}

func (f *fakeEC2) describes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.describe
}

func (f *fakeEC2) tries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

func newFakeEC2(t *testing.T, names ...string) *fakeEC2 {
	f := &fakeEC2{zones: map[string][]string{}}
	for _, n := range names {
		f.infos = append(f.infos, motoInfo(t, n))
		f.zones[n] = []string{"us-east-1a", "us-east-1b"}
	}
	return f
}

func names(its []*cloudprovider.InstanceType) []string {
	var out []string
	for _, it := range its {
		out = append(out, it.Name)
	}
	return out
}

func TestDescribeIsPaginated(t *testing.T) {
	// hpc7a.12xlarge has no price in the catalog.
	f := newFakeEC2(t, "m5.large", "m6g.large", "c5.large", "mac1.metal", "hpc7a.12xlarge")
	pv := motoInfo(t, "m5.large")
	pv.InstanceType, pv.SupportedVirtualizationTypes = "pv.large", []ec2types.VirtualizationType{ec2types.VirtualizationTypeParavirtual}
	f.infos = append(f.infos, pv)
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clocktesting.NewFakeClock(time.Now())})
	its, err := p.List(context.Background(), nodeClass("us-east-1a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(its); !slices.Equal(got, []string{"c5.large", "hpc7a.12xlarge", "m5.large", "m6g.large"}) {
		t.Errorf("listed %v, want the four types a node can run, from every page", got)
	}
	for _, it := range its {
		if it.Name == "hpc7a.12xlarge" {
			if len(it.Offerings) != 0 {
				t.Errorf("%s has no price but offerings %v", it.Name, offeringKeys(it))
			}
			continue
		}
		if len(it.Offerings) != 2 {
			t.Errorf("%s: offerings %v, want on-demand and spot in us-east-1a (offerings are paged too)", it.Name, offeringKeys(it))
		}
	}
}

// TestRefresh follows the described data on a fake clock: kept for an hour,
// kept past a failure, and a failure before any data is an error.
func TestRefresh(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFakeEC2(t, "m5.large")
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clk})
	nc := nodeClass("us-east-1a")
	ctx := context.Background()

	f.set(errors.New("UnauthorizedOperation: not allowed to ec2:DescribeInstanceTypes"))
	if _, err := p.List(ctx, nc); err == nil || !strings.Contains(err.Error(), "describing instance types: UnauthorizedOperation") {
		t.Fatalf("List with EC2 failing and no data: %v, want the EC2 error", err)
	}
	f.set(nil)
	steps := []struct {
		name      string
		step      time.Duration
		err       error
		infos     []string
		want      []string
		describes int
	}{
		{"the first List after the failure's backoff describes", FailureBackoff, nil, nil, []string{"m5.large"}, 1},
		{"within the hour the data is kept", RefreshInterval - time.Second, nil, []string{"m5.large", "c5.large"}, []string{"m5.large"}, 1},
		{"after an hour it is described again", time.Second, nil, nil, []string{"c5.large", "m5.large"}, 2},
		{"a failed refresh keeps the last data", RefreshInterval, errors.New("RequestLimitExceeded"), []string{"c5.large"}, []string{"c5.large", "m5.large"}, 2},
		{"and is not retried within a minute", RetryInterval - time.Second, nil, nil, []string{"c5.large", "m5.large"}, 2},
		{"but after it", time.Second, nil, nil, []string{"c5.large"}, 3},
	}
	for _, s := range steps {
		clk.Step(s.step)
		var infos []ec2types.InstanceTypeInfo
		for _, n := range s.infos {
			infos = append(infos, motoInfo(t, n))
		}
		f.set(s.err, infos...)
		its, err := p.List(ctx, nc)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := names(its); !slices.Equal(got, s.want) || f.describes() != s.describes {
			t.Errorf("%s: listed %v after %d describes, want %v after %d", s.name, got, f.describes(), s.want, s.describes)
		}
	}
}

// TestListFollowsAvailabilityPricesAndTheClass: the cached result moves
// when the unavailable cache, a price or the class moves, and not otherwise.
func TestListFollowsAvailabilityPricesAndTheClass(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	spot := &fakeSpot{price: "0.0300"}
	prices := pricing.New(pricing.Options{EC2: spot, Region: "us-east-1", Isolated: true, Clock: clk})
	ice := unavailable.New(clk, unavailable.DefaultTTL)
	p := New(Options{EC2: newFakeEC2(t, "m5.large"), Region: "us-east-1", Pricing: prices, Unavailable: ice, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clk})
	ctx := context.Background()
	nc := nodeClass("us-east-1a", "us-east-1b")
	list := func() []*cloudprovider.InstanceType {
		t.Helper()
		its, err := p.List(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		return its
	}

	first := list()
	if again := list(); again[0] != first[0] {
		t.Error("an unchanged List was computed again")
	}
	if o := offering(t, first, "m5.large", "us-east-1a", "spot"); !o.Available {
		t.Fatal("us-east-1a spot unavailable before any error")
	}

	ice.MarkUnavailable("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity")
	its := list()
	if o := offering(t, its, "m5.large", "us-east-1a", "spot"); o.Available {
		t.Error("us-east-1a spot still available after EC2 ran out of it")
	}
	for _, other := range [][2]string{{"us-east-1a", "on-demand"}, {"us-east-1b", "spot"}} {
		if o := offering(t, its, "m5.large", other[0], other[1]); !o.Available {
			t.Errorf("%s %s unavailable too", other[0], other[1])
		}
	}
	clk.Step(unavailable.DefaultTTL)
	if o := offering(t, list(), "m5.large", "us-east-1a", "spot"); !o.Available {
		t.Error("us-east-1a spot still unavailable after the TTL")
	}

	if err := prices.RefreshSpot(ctx); err != nil {
		t.Fatal(err)
	}
	if o := offering(t, list(), "m5.large", "us-east-1b", "spot"); o.Price != 0.03 {
		t.Errorf("spot price %v after a refresh, want the API's 0.03", o.Price)
	}

	nc.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}
	if pods := list()[0].Allocatable.Pods().Value(); pods != 110 {
		t.Errorf("pods %d after the class set maxPods 110", pods)
	}
	nc.Status.Subnets = nc.Status.Subnets[:1]
	if keys := offeringKeys(list()[0]); !slices.Equal(keys, []string{"us-east-1a/on-demand", "us-east-1a/spot"}) {
		t.Errorf("offerings %v after the class lost its us-east-1b subnet", keys)
	}
}

func TestListNamesTheClassOfABadKubelet(t *testing.T) {
	p := New(Options{EC2: newFakeEC2(t, "m5.large"), Region: "us-east-1", Clock: clocktesting.NewFakeClock(time.Now())})
	nc := nodeClass("us-east-1a")
	nc.Spec.Kubelet = &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"memory": "lots"}}
	_, err := p.List(context.Background(), nc)
	if err == nil || !strings.Contains(err.Error(), `EC2NodeClass default: spec.kubelet.kubeReserved["memory"]`) {
		t.Fatalf("error %v, want one naming the class and the field", err)
	}
}

// fakeSpot prices every m5.large zone at one price.
type fakeSpot struct{ price string }

func (f *fakeSpot) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	var out ec2.DescribeSpotPriceHistoryOutput
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		out.SpotPriceHistory = append(out.SpotPriceHistory, ec2types.SpotPrice{InstanceType: "m5.large", AvailabilityZone: aws.String(z), SpotPrice: aws.String(f.price), Timestamp: in.StartTime})
	}
	return &out, nil
}

// TestFailureBackoff: with no data yet, a failed description is answered
// from memory for FailureBackoff, to every caller at once too, so a refused
// permission costs a call per window rather than one per caller; the first
// List after the window tries again and, once allowed, recovers.
func TestFailureBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	f := newFakeEC2(t, "m5.large")
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clk})
	nc := nodeClass("us-east-1a")
	denied := errors.New("UnauthorizedOperation: not allowed to ec2:DescribeInstanceTypes")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, s := range []struct {
		name    string
		step    time.Duration
		ec2Err  error // what EC2 answers from this step on
		ctx     context.Context
		callers int // Lists at once
		wantErr error
		tries   int // DescribeInstanceTypes calls so far
	}{
		{"a caller gave up: its failure says nothing about EC2", 0, context.Canceled, cancelled, 1, context.Canceled, 1},
		{"so the next caller tries", 0, denied, nil, 1, denied, 2},
		{"callers within the window: no call", time.Second, denied, nil, 8, denied, 2},
		{"until the window's end", FailureBackoff - 2*time.Second, denied, nil, 8, denied, 2},
		{"after it: one more call", time.Second, denied, nil, 8, denied, 3},
		{"a caller gives up after the next window", FailureBackoff, context.Canceled, cancelled, 1, context.Canceled, 4},
		{"so the refusal before it is not answered again", 0, denied, nil, 1, denied, 5},
		{"allowed within the window: the refusal is still answered", FailureBackoff - time.Second, nil, nil, 1, denied, 5},
		{"allowed after the window: recovered", time.Second, nil, nil, 8, nil, 6},
		{"and kept", FailureBackoff, nil, nil, 8, nil, 6},
	} {
		clk.Step(s.step)
		f.set(s.ec2Err)
		// A call in flight is answered only once every other caller not
		// done yet waits for it, so each must learn its outcome, not call
		// again.
		var done atomic.Int32
		f.onCall = func() { waitFetchers(t, func() int { return s.callers - 1 - int(done.Load()) }) }
		ctx := s.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		errs := make([]error, s.callers)
		var wg sync.WaitGroup
		for i := range s.callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.List(ctx, nc)
				done.Add(1)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if !errors.Is(err, s.wantErr) && (s.wantErr != nil || err != nil) {
				t.Errorf("%s: List error %v, want %v", s.name, err, s.wantErr)
				break
			}
		}
		if got := f.tries(); got != s.tries {
			t.Errorf("%s: %d DescribeInstanceTypes calls, want %d", s.name, got, s.tries)
		}
	}
}

// waitFetchers returns once n() goroutines wait for the lock that lets
// one description run at a time, as their stacks show.
func waitFetchers(t *testing.T, n func() int) {
	buf := make([]byte, 1<<20)
	for range 100000 {
		waiting := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "Mutex).Lock") && strings.Contains(g, "(*Provider).ensureFresh") {
				waiting++
			}
		}
		if waiting >= n() {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("%d callers never all waited for the description in flight", n())
}

// TestNestedVirtualization: a class asking for nested virtualization gets
// only the types EC2 lists with the feature; the others would fail the
// launch. Asking for it disabled, or not at all, keeps every type.
func TestNestedVirtualization(t *testing.T) {
	f := newFakeEC2(t, "m5.large", "c5.large")
	for i := range f.infos {
		if f.infos[i].InstanceType == "c5.large" {
			f.infos[i].ProcessorInfo.SupportedFeatures = []ec2types.SupportedAdditionalProcessorFeature{ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization}
		}
	}
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clocktesting.NewFakeClock(time.Now())})
	for _, tt := range []struct {
		setting *string
		want    []string
	}{
		{nil, []string{"c5.large", "m5.large"}},
		{ptr.To("disabled"), []string{"c5.large", "m5.large"}},
		{ptr.To("enabled"), []string{"c5.large"}},
	} {
		nc := nodeClass("us-east-1a")
		if tt.setting != nil {
			nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: tt.setting}
		}
		its, err := p.List(context.Background(), nc)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(its); !slices.Equal(got, tt.want) {
			t.Errorf("nestedVirtualization %v: listed %v, want %v", ptr.Deref(tt.setting, "unset"), got, tt.want)
		}
	}
}

// A class whose placement group is a cluster group lists only the types
// that take one; one with connectionTracking only Nitro types.
func TestPlacementStrategyAndConntrack(t *testing.T) {
	f := newFakeEC2(t, "m5.large", "c7i-flex.large", "c4.large")
	p := New(Options{EC2: f, Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clocktesting.NewFakeClock(time.Now()),
		PlacementGroup: func(context.Context, *awsv1.EC2NodeClass) (Placement, error) {
			return Placement{ID: "pg-1", Strategy: "cluster"}, nil
		}})
	for _, tt := range []struct {
		name      string
		group     bool
		conntrack bool
		want      []string
	}{
		{"neither", false, false, []string{"c4.large", "c7i-flex.large", "m5.large"}},
		{"a cluster group", true, false, []string{"c4.large", "m5.large"}},
		{"connectionTracking", false, true, []string{"c7i-flex.large", "m5.large"}},
	} {
		nc := nodeClass("us-east-1a")
		if tt.group {
			nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: "training"}
		}
		if tt.conntrack {
			nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr.To(int32(3600))}
		}
		its, err := p.List(context.Background(), nc)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(its); !slices.Equal(got, tt.want) {
			t.Errorf("%s: listed %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestOutOfCapacityInTheGroup: an offering EC2 ran out of inside a
// placement group is unavailable to the classes launching into that group
// alone.
func TestOutOfCapacityInTheGroup(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	out := unavailable.New(clk, unavailable.DefaultTTL)
	p := New(Options{EC2: newFakeEC2(t, "m5.large"), Region: "us-east-1", VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent, Clock: clk, Unavailable: out,
		PlacementGroup: func(context.Context, *awsv1.EC2NodeClass) (Placement, error) {
			return Placement{ID: "pg-1", Strategy: "cluster"}, nil
		}})
	out.MarkUnavailableIn("pg-1", "m5.large", "us-east-1a", v1.CapacityTypeOnDemand, "InsufficientInstanceCapacity")
	for _, tc := range []struct {
		name      string
		group     bool
		available bool
	}{
		{name: "a class launching into the group", group: true, available: false},
		{name: "a class without a group", group: false, available: true},
	} {
		nc := nodeClass("us-east-1a")
		if tc.group {
			nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: "training"}
		}
		its, err := p.List(context.Background(), nc)
		if err != nil || len(its) != 1 {
			t.Fatalf("%s: listed %d types: %v", tc.name, len(its), err)
		}
		for _, o := range its[0].Offerings {
			if o.CapacityType == v1.CapacityTypeOnDemand && o.Available != tc.available {
				t.Errorf("%s: the on-demand offering available: %v, want %v", tc.name, o.Available, tc.available)
			}
		}
	}
}
