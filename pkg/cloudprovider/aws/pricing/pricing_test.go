package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

// clients are the product's SDK clients: EC2 on moto, and the Price List
// API on priceList when it is set (moto answers 500 to it).
func clients(t *testing.T, region string, priceList *priceListServer) *awsclient.Clients {
	t.Helper()
	if priceList != nil {
		t.Setenv("AWS_ENDPOINT_URL_PRICING", priceList.URL)
	}
	return mototest.Clients(t, region)
}

// priceListServer answers GetProducts as the Price List API does (JSON 1.1,
// each product a JSON document in a string, paginated), filtering its
// products by the request's TERM_MATCH filters.
type priceListServer struct {
	*httptest.Server
	products []map[string]any
	pageSize int

	mu       sync.Mutex
	fail     bool
	requests []getProductsRequest
}

type getProductsRequest struct {
	ServiceCode   string
	FormatVersion string
	NextToken     string
	Filters       []struct{ Type, Field, Value string }
}

func newPriceListServer(t *testing.T, pageSize int, products ...map[string]any) *priceListServer {
	s := &priceListServer{products: products, pageSize: pageSize}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *priceListServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if got := r.Header.Get("X-Amz-Target"); got != "AWSPriceListService.GetProducts" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"InvalidParameterException","message":"unexpected target %s"}`, got)
		return
	}
	var req getProductsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"InvalidParameterException","message":%q}`, err.Error())
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	fail := s.fail
	s.mu.Unlock()
	if fail {
		// Not retryable, so the test sees the failure at once.
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"AccessDeniedException","message":"User is not authorized to perform: pricing:GetProducts"}`)
		return
	}
	var matching []string
	for _, p := range s.products {
		attrs := p["product"].(map[string]any)["attributes"].(map[string]any)
		ok := p["serviceCode"] == req.ServiceCode
		for _, f := range req.Filters {
			ok = ok && f.Type == "TERM_MATCH" && attrs[f.Field] == f.Value
		}
		if ok {
			doc, _ := json.Marshal(p)
			matching = append(matching, string(doc))
		}
	}
	start := 0
	if req.NextToken != "" {
		fmt.Sscanf(req.NextToken, "page-%d", &start)
	}
	end := min(start+s.pageSize, len(matching))
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": matching[start:end]}
	if end < len(matching) {
		out["NextToken"] = fmt.Sprintf("page-%d", end)
	}
	json.NewEncoder(w).Encode(out)
}

func (s *priceListServer) setFail(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

func (s *priceListServer) calls() []getProductsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]getProductsRequest(nil), s.requests...)
}

// ec2Product is one EC2 product of the price list in the real format.
func ec2Product(instanceType, region, os, tenancy, capacityStatus, usd string) map[string]any {
	sku := strings.ToUpper(strings.NewReplacer(".", "", "-", "").Replace(instanceType + region + os + tenancy + capacityStatus))
	term := sku + ".JRTCKXETXF"
	// The Price List files bare-metal sizes as their own product family.
	family := "Compute Instance"
	if strings.Contains(instanceType, ".metal") {
		family = "Compute Instance (bare metal)"
	}
	return map[string]any{
		"product": map[string]any{
			"productFamily": family,
			"sku":           sku,
			"attributes": map[string]any{
				"productFamily": family,
				"instanceType":  instanceType, "regionCode": region, "operatingSystem": os, "tenancy": tenancy,
				"preInstalledSw": "NA", "capacitystatus": capacityStatus, "licenseModel": "No License required",
				"servicecode": "AmazonEC2", "usagetype": "BoxUsage:" + instanceType,
			},
		},
		"serviceCode":     "AmazonEC2",
		"version":         "20260101000000",
		"publicationDate": "2026-01-01T00:00:00Z",
		"terms": map[string]any{"OnDemand": map[string]any{term: map[string]any{
			"offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-01-01T00:00:00Z", "termAttributes": map[string]any{},
			"priceDimensions": map[string]any{term + ".6YS6EN2CT7": map[string]any{
				"unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []any{}, "rateCode": term + ".6YS6EN2CT7",
				"description":  fmt.Sprintf("$%s per On Demand %s %s Instance Hour", usd, os, instanceType),
				"pricePerUnit": map[string]any{"USD": usd},
			}},
		}}},
	}
}

// priceList has Linux shared on-demand prices for three types in us-east-1
// and eu-west-1, and decoys that only wrong filters would let through.
func priceList(t *testing.T, pageSize int) *priceListServer {
	return newPriceListServer(t, pageSize,
		ec2Product("m5.large", "us-east-1", "Linux", "Shared", "Used", "0.1111000000"),
		ec2Product("m5.xlarge", "us-east-1", "Linux", "Shared", "Used", "0.2222000000"),
		ec2Product("t3.micro", "us-east-1", "Linux", "Shared", "Used", "0.0333000000"),
		ec2Product("m5.large", "eu-west-1", "Linux", "Shared", "Used", "0.4444000000"),
		ec2Product("m5.large", "us-east-1", "Windows", "Shared", "Used", "9.0000000000"),
		ec2Product("m5.large", "us-east-1", "Linux", "Dedicated", "Used", "8.0000000000"),
		// A type listed under Dedicated alone (not bare metal) has no
		// shared price: planned from this listing it would be dearer.
		ec2Product("c5.large", "us-east-1", "Linux", "Dedicated", "Used", "1.0000000000"),
		ec2Product("m5.large", "us-east-1", "Linux", "Shared", "UnusedCapacityReservation", "0.0010000000"),
		// A type listed at zero is not for sale on demand here.
		ec2Product("p5.48xlarge", "us-east-1", "Linux", "Shared", "Used", "0.0000000000"),
		// Bare metal is filed under Dedicated tenancy.
		ec2Product("m5.metal", "us-east-1", "Linux", "Dedicated", "Used", "4.6080000000"),
		// The China regions' prices are in yuan.
		inYuan(ec2Product("m5.large", "cn-north-1", "Linux", "Shared", "Used", "0.9230000000")),
	)
}

// inYuan is a product priced in CNY, as the China regions' Price List is.
func inYuan(product map[string]any) map[string]any {
	for _, term := range product["terms"].(map[string]any)["OnDemand"].(map[string]any) {
		for _, dim := range term.(map[string]any)["priceDimensions"].(map[string]any) {
			d := dim.(map[string]any)
			d["pricePerUnit"] = map[string]any{"CNY": d["pricePerUnit"].(map[string]any)["USD"]}
		}
	}
	return product
}

func catalogOnDemand(t *testing.T, region, it string) float64 {
	t.Helper()
	prices, err := catalog.OnDemandPrices(region)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := prices[it]
	if !ok {
		t.Fatalf("the catalog has no price for %s", it)
	}
	return p
}

func TestOnDemand(t *testing.T) {
	type lookup struct {
		it    string
		price float64 // -1: the catalog's price
		ok    bool
	}
	cases := []struct {
		name       string
		region     string
		isolated   bool
		pageSize   int
		fail       bool
		wantErr    string
		wantSource Source
		wantCalls  int
		want       []lookup
	}{
		{
			name: "the API's prices replace the catalog's, read across pages", region: "us-east-1", pageSize: 2,
			wantSource: SourceAPI, wantCalls: 3,
			want: []lookup{{"m5.large", 0.1111, true}, {"m5.xlarge", 0.2222, true}, {"t3.micro", 0.0333, true}, {"m5.metal", 4.608, true},
				// Types the API does not price have no price, not the model's.
				{"c5.large", 0, false}, {"p5.48xlarge", 0, false}},
		},
		{
			name: "one page", region: "us-east-1", pageSize: 100, wantSource: SourceAPI, wantCalls: 2,
			want: []lookup{{"m5.large", 0.1111, true}},
		},
		{
			name: "the region's own prices", region: "eu-west-1", pageSize: 100, wantSource: SourceAPI, wantCalls: 2,
			want: []lookup{{"m5.large", 0.4444, true}, {"m5.xlarge", 0, false}},
		},
		{
			name: "China's prices are read in yuan, as its spot prices are", region: "cn-north-1", pageSize: 100, wantSource: SourceAPI, wantCalls: 2,
			want: []lookup{{"m5.large", 0.923, true}},
		},
		{
			name: "an unreachable API leaves the catalog", region: "us-east-1", pageSize: 100, fail: true,
			wantErr: "AccessDeniedException", wantSource: SourceCatalog, wantCalls: 1,
			want: []lookup{{"m5.large", -1, true}, {"c5.large", -1, true}},
		},
		{
			name: "isolated never calls the API", region: "us-east-1", pageSize: 100, isolated: true,
			wantErr: "isolated VPC", wantSource: SourceCatalog, wantCalls: 0,
			want: []lookup{{"m5.large", -1, true}},
		},
		{
			name: "isolated in another region has the region's catalog prices", region: "ap-northeast-2", pageSize: 100, isolated: true,
			wantErr: "isolated VPC", wantSource: SourceCatalog, wantCalls: 0,
			want: []lookup{{"m5.large", -1, true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := priceList(t, tc.pageSize)
			srv.setFail(tc.fail)
			c := clients(t, tc.region, srv)
			p := New(Options{Pricing: c.Pricing, EC2: c.EC2, Region: tc.region, Isolated: tc.isolated, Clock: clocktesting.NewFakeClock(time.Now())})
			seq := p.SeqNum()
			err := p.RefreshOnDemand(context.Background())
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("RefreshOnDemand error %v, want one containing %q", err, tc.wantErr)
			}
			if got := p.Status().OnDemandSource; got != tc.wantSource {
				t.Errorf("source %q, want %q", got, tc.wantSource)
			}
			if changed := p.SeqNum() != seq; changed != (tc.wantSource == SourceAPI) {
				t.Errorf("SeqNum changed=%v after a refresh from %s", changed, tc.wantSource)
			}
			calls := srv.calls()
			if len(calls) != tc.wantCalls {
				t.Errorf("%d GetProducts calls, want %d", len(calls), tc.wantCalls)
			}
			for _, call := range calls {
				var filters []string
				for _, f := range call.Filters {
					filters = append(filters, f.Type+":"+f.Field+"="+f.Value)
				}
				sort.Strings(filters)
				shared := fmt.Sprintf("[TERM_MATCH:capacitystatus=Used TERM_MATCH:operatingSystem=Linux TERM_MATCH:preInstalledSw=NA TERM_MATCH:regionCode=%s TERM_MATCH:tenancy=Shared]", tc.region)
				metal := fmt.Sprintf("[TERM_MATCH:capacitystatus=Used TERM_MATCH:operatingSystem=Linux TERM_MATCH:preInstalledSw=NA TERM_MATCH:productFamily=Compute Instance (bare metal) TERM_MATCH:regionCode=%s TERM_MATCH:tenancy=Dedicated]", tc.region)
				if got := fmt.Sprint(filters); call.ServiceCode != "AmazonEC2" || call.FormatVersion != "aws_v1" || got != shared && got != metal {
					t.Errorf("GetProducts(%s, %s, %v), want AmazonEC2, aws_v1, %s or %s", call.ServiceCode, call.FormatVersion, filters, shared, metal)
				}
			}
			for _, l := range tc.want {
				want := l.price
				if want < 0 {
					want = catalogOnDemand(t, tc.region, l.it)
				}
				if got, ok := p.OnDemand(l.it); got != want || ok != l.ok {
					t.Errorf("OnDemand(%s) = %v, %v; want %v, %v", l.it, got, ok, want, l.ok)
				}
			}
		})
	}
}

// A refresh that fails after one succeeded keeps the prices it had.
func TestFailedRefreshKeepsTheLastGoodPrices(t *testing.T) {
	srv := priceList(t, 100)
	c := clients(t, "us-east-1", srv)
	p := New(Options{Pricing: c.Pricing, EC2: c.EC2, Region: "us-east-1", Clock: clocktesting.NewFakeClock(time.Now())})
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, seq := p.Status(), p.SeqNum()
	srv.setFail(true)
	if err := p.RefreshOnDemand(context.Background()); err == nil {
		t.Fatal("RefreshOnDemand succeeded against a failing API")
	}
	if got, _ := p.OnDemand("m5.large"); got != 0.1111 {
		t.Errorf("OnDemand(m5.large) = %v after a failed refresh, want the last good 0.1111", got)
	}
	if _, ok := p.OnDemand("c5.large"); ok {
		t.Error("a failed refresh brought the catalog's prices back")
	}
	if p.Status() != before || p.SeqNum() != seq {
		t.Errorf("a failed refresh changed the status %+v -> %+v or SeqNum %d -> %d", before, p.Status(), seq, p.SeqNum())
	}
	// The same prices again change nothing a cache should notice.
	srv.setFail(false)
	if err := p.RefreshOnDemand(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.SeqNum() != seq {
		t.Error("SeqNum changed though no price did")
	}
}

// Spot prices through moto's DescribeSpotPriceHistory, which prices every
// type it knows at $0.00001 in every zone of the region.
func TestSpotFromMoto(t *testing.T) {
	c := clients(t, "us-east-1", nil)
	p := New(Options{EC2: c.EC2, Region: "us-east-1", Isolated: true, Clock: clocktesting.NewFakeClock(time.Now())})
	want := catalog.SpotPrice("m5.large", "us-east-1a", catalogOnDemand(t, "us-east-1", "m5.large"))
	if got, ok := p.Spot("m5.large", "us-east-1a"); !ok || got != want {
		t.Fatalf("before a refresh Spot = %v, %v; want the catalog's %v", got, ok, want)
	}
	if err := p.RefreshSpot(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Status()
	if st.SpotSource != SourceAPI || st.SpotOfferings < 1000 || st.OnDemandSource != SourceCatalog {
		t.Errorf("status %+v, want spot from the API with over 1000 offerings, on-demand from the catalog", st)
	}
	for _, l := range []struct {
		it, zone string
		price    float64
		ok       bool
	}{
		{"m5.large", "us-east-1a", 0.00001, true},
		{"m5.large", "us-east-1b", 0.00001, true},
		{"m5.large", "us-west-2a", 0, false},
		{"no.such-type", "us-east-1a", 0, false},
	} {
		if got, ok := p.Spot(l.it, l.zone); got != l.price || ok != l.ok {
			t.Errorf("Spot(%s, %s) = %v, %v; want %v, %v", l.it, l.zone, got, ok, l.price, l.ok)
		}
	}
}

// fakeSpot pages spot price history and records the requests.
type fakeSpot struct {
	mu    sync.Mutex
	pages [][]ec2types.SpotPrice
	err   error
	reqs  []*ec2.DescribeSpotPriceHistoryInput
	calls chan struct{}
}

func (f *fakeSpot) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, in)
	err := f.err
	f.mu.Unlock()
	if f.calls != nil {
		f.calls <- struct{}{}
	}
	if err != nil {
		return nil, err
	}
	page := 0
	if in.NextToken != nil {
		fmt.Sscanf(*in.NextToken, "%d", &page)
	}
	out := &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: f.pages[page]}
	if page+1 < len(f.pages) {
		out.NextToken = aws.String(fmt.Sprint(page + 1))
	}
	return out, nil
}

func spotPrice(it, zone, price string, at time.Time) ec2types.SpotPrice {
	return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String(zone), SpotPrice: aws.String(price),
		ProductDescription: ec2types.RIProductDescription("Linux/UNIX"), Timestamp: aws.Time(at)}
}

func TestSpotTakesTheLatestPricePerZone(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	vpc := spotPrice("m5.large", "us-east-1c", "0.0450", now)
	vpc.ProductDescription = "Linux/UNIX (Amazon VPC)"
	f := &fakeSpot{pages: [][]ec2types.SpotPrice{
		{spotPrice("m5.large", "us-east-1a", "0.0300", now.Add(-time.Hour)), spotPrice("m5.large", "us-east-1b", "0.0400", now)},
		{spotPrice("m5.large", "us-east-1a", "0.0350", now.Add(-time.Minute)), spotPrice("m5.large", "us-east-1a", "0.0100", now.Add(-2*time.Hour)),
			spotPrice("m5.large", "us-east-1c", "0.0500", now.Add(-time.Hour)), vpc},
	}}
	p := New(Options{EC2: f, Region: "us-east-1", Isolated: true, Clock: clocktesting.NewFakeClock(now)})
	if err := p.RefreshSpot(context.Background()); err != nil {
		t.Fatal(err)
	}
	for zone, want := range map[string]float64{"us-east-1a": 0.035, "us-east-1b": 0.04, "us-east-1c": 0.045} {
		if got, _ := p.Spot("m5.large", zone); got != want {
			t.Errorf("Spot(m5.large, %s) = %v, want the latest %v", zone, got, want)
		}
	}
	if len(f.reqs) != 2 {
		t.Fatalf("%d calls, want one per page", len(f.reqs))
	}
	in := f.reqs[0]
	if fmt.Sprint(in.ProductDescriptions) != "[Linux/UNIX Linux/UNIX (Amazon VPC)]" || !aws.ToTime(in.StartTime).Equal(now) {
		t.Errorf("asked for %v from %v, want both Linux descriptions from now (%v)", in.ProductDescriptions, aws.ToTime(in.StartTime), now)
	}
}

// fakePricing counts GetProducts calls and can fail.
type fakePricing struct {
	mu    sync.Mutex
	err   error
	calls chan struct{}
}

// GetProducts counts a refresh at its first query, the shared-tenancy one
// (the bare-metal query follows it in the same refresh).
func (f *fakePricing) GetProducts(_ context.Context, in *awspricing.GetProductsInput, _ ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	for _, fl := range in.Filters {
		if aws.ToString(fl.Field) == "tenancy" && aws.ToString(fl.Value) == "Shared" {
			f.calls <- struct{}{}
		}
	}
	if err != nil {
		return nil, err
	}
	doc, _ := json.Marshal(ec2Product("m5.large", "us-east-1", "Linux", "Shared", "Used", "0.1"))
	return &awspricing.GetProductsOutput{PriceList: []string{string(doc)}}, nil
}

func (f *fakePricing) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// TestStart follows the refresh loop on a fake clock: both refreshes at
// once, spot every SpotInterval, on-demand every OnDemandInterval, and a
// failed refresh retried on the spot interval.
func TestStart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	od := &fakePricing{calls: make(chan struct{}, 100)}
	spot := &fakeSpot{pages: [][]ec2types.SpotPrice{{spotPrice("m5.large", "us-east-1a", "0.03", clk.Now())}}, calls: make(chan struct{}, 100)}
	p := New(Options{Pricing: od, EC2: spot, Region: "us-east-1", Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()

	// step waits for the loop to sleep, moves the clock, and counts the
	// refreshes that follow before the loop sleeps again.
	waitAsleep := func() {
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the refresh loop never went to sleep")
			}
			time.Sleep(time.Millisecond)
		}
	}
	drain := func(c chan struct{}) int {
		n := 0
		for {
			select {
			case <-c:
				n++
			default:
				return n
			}
		}
	}
	waitAsleep()
	if n, m := drain(od.calls), drain(spot.calls); n != 1 || m != 1 {
		t.Fatalf("at start: %d on-demand and %d spot refreshes, want 1 and 1", n, m)
	}
	if st := p.Status(); st.OnDemandSource != SourceAPI || st.SpotSource != SourceAPI {
		t.Fatalf("status after the first refreshes %+v", st)
	}
	for _, s := range []struct {
		name             string
		step             time.Duration
		odErr            error
		wantOD, wantSpot int
	}{
		{"within the spot interval nothing is due", SpotInterval - time.Second, nil, 0, 0},
		{"spot is due", time.Second, nil, 0, 1},
		{"spot again", SpotInterval, nil, 0, 1},
		{"on-demand is due after 12 hours, and fails", OnDemandInterval - 2*SpotInterval, errors.New("throttled"), 1, 1},
		{"the failed on-demand refresh is retried on the spot interval", SpotInterval, nil, 1, 1},
		{"then back to twelve hours", SpotInterval, nil, 0, 1},
	} {
		od.setErr(s.odErr)
		clk.Step(s.step)
		// The loop wakes, refreshes, and sleeps again; the timer it sets
		// is a new waiter only after the refreshes are done.
		waitAsleep()
		if n, m := drain(od.calls), drain(spot.calls); n != s.wantOD || m != s.wantSpot {
			t.Errorf("%s: %d on-demand and %d spot refreshes, want %d and %d", s.name, n, m, s.wantOD, s.wantSpot)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v when its context ended", err)
	}
}
