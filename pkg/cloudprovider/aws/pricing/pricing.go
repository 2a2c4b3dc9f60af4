// Package pricing knows what each instance type costs in the region: the
// on-demand price from the AWS Price List API and the spot price per zone
// from EC2's spot price history, refreshed in the background.
//
// Until a refresh has succeeded, and for good when the Price List API is out
// of reach (an isolated VPC), prices come from the embedded catalog, so that
// Joiner can rank instance types from its first second and in any network.
// Prices only move when a refresh succeeds: a failed refresh keeps the last
// good prices rather than dropping back to the catalog, since prices a few
// hours old are closer to the truth than the model.
package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// PricingAPI is the part of the Price List API the provider calls.
type PricingAPI interface {
	GetProducts(ctx context.Context, in *awspricing.GetProductsInput, optFns ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error)
}

// SpotAPI is the part of EC2 the provider calls.
type SpotAPI interface {
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// Refresh intervals of Start.
//
// On-demand list prices change a few times a year, and the Price List API
// answers in pages of 100 products, about 15 calls per refresh: twice a day
// is plenty.
//
// Spot prices move gradually, a few times a day per market, and one refresh
// (spot price history from now on) costs a handful of paginated EC2 calls.
// Every five minutes keeps the ranking of spot offerings within minutes of
// the market at a negligible share of the EC2 request budget.
//
// After a failure either refresh is retried on the spot interval, so that
// a Price List endpoint that was down at start does not leave the catalog's
// prices in place for twelve hours.
const (
	OnDemandInterval = 12 * time.Hour
	SpotInterval     = 5 * time.Minute
)

// Source says where a set of prices came from.
type Source string

const (
	// SourceCatalog is the embedded catalog: no refresh has succeeded yet,
	// or (on-demand with Isolated) none is tried.
	SourceCatalog Source = "catalog"
	// SourceAPI is the last successful refresh from AWS.
	SourceAPI Source = "api"
)

// Options configure a Provider.
type Options struct {
	// Pricing is the Price List client (its endpoint is in us-east-1,
	// ap-south-1 or eu-central-1, whatever the region); nil behaves as
	// Isolated.
	Pricing PricingAPI
	// EC2 is the region's EC2 client; nil keeps the catalog's spot prices.
	EC2 SpotAPI
	// Region whose prices are wanted.
	Region string
	// Isolated (ISOLATED_VPC) never calls the Price List API, which has no
	// VPC endpoint; on-demand prices stay the catalog's. Spot prices still
	// come from EC2, which has one.
	Isolated bool
	// Clock drives Start's refreshes and the spot history's start time.
	Clock clock.Clock
	// Log receives refresh failures and source changes from Start.
	Log logr.Logger
	// RetryInterval is how soon Start retries a failed refresh; zero is
	// SpotInterval. Only tests shorten it, to watch a refused permission
	// being granted without waiting five minutes.
	RetryInterval time.Duration
}

// Status describes the prices in use, for logs and metrics.
type Status struct {
	OnDemandSource Source
	SpotSource     Source
	// OnDemandTypes is how many types have an on-demand price;
	// SpotOfferings how many (type, zone) pairs have a spot price from the
	// API (zero while spot comes from the catalog, which prices any zone).
	OnDemandTypes int
	SpotOfferings int
	// OnDemandUpdated and SpotUpdated are the times of the last successful
	// refresh, zero while the catalog is in use.
	OnDemandUpdated time.Time
	SpotUpdated     time.Time
}

type spotKey struct{ instanceType, zone string }

// Provider answers prices. Its methods are safe for concurrent use.
type Provider struct {
	opts Options

	mu       sync.RWMutex
	catalog  map[string]float64 // on-demand, the fallback for both
	onDemand map[string]float64 // from the API, nil until a refresh succeeds
	spot     map[spotKey]float64
	status   Status
	seq      uint64
}

// New returns a provider that answers from the catalog until Refresh or
// Start succeeds.
func New(opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = SpotInterval
	}
	fallback, err := catalog.OnDemandPrices(opts.Region)
	if err != nil {
		// The catalog is embedded and tested; failing to read it is a
		// build defect, and an empty fallback only means no offerings.
		fallback = map[string]float64{}
	}
	return &Provider{
		opts:    opts,
		catalog: fallback,
		status:  Status{OnDemandSource: SourceCatalog, SpotSource: SourceCatalog, OnDemandTypes: len(fallback)},
	}
}

// OnDemand is the on-demand price ($/h) of the type, false when it has none.
func (p *Provider) OnDemand(instanceType string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	prices := p.onDemand
	if prices == nil {
		prices = p.catalog
	}
	price, ok := prices[instanceType]
	return price, ok
}

// Spot is the spot price ($/h) of the type in the zone, false when it has none.
func (p *Provider) Spot(instanceType, zone string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.spot != nil {
		price, ok := p.spot[spotKey{instanceType, zone}]
		return price, ok
	}
	od, ok := p.catalog[instanceType]
	if !ok {
		return 0, false
	}
	return catalog.SpotPrice(instanceType, zone, od), true
}

// Status reports where the prices in use come from.
func (p *Provider) Status() Status {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.status
}

// SeqNum changes whenever a refresh changes a price, so caches of priced
// offerings can key on it.
func (p *Provider) SeqNum() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.seq
}

// Refresh fetches on-demand (unless Isolated) and spot prices once. Each
// half succeeds or fails on its own; the error joins both failures.
func (p *Provider) Refresh(ctx context.Context) error {
	return errors.Join(p.RefreshOnDemand(ctx), p.RefreshSpot(ctx))
}

// ErrIsolated is returned by RefreshOnDemand when the Price List API is not
// to be called.
var ErrIsolated = errors.New("the Price List API is not called in an isolated VPC (ISOLATED_VPC); on-demand prices come from the embedded catalog")

// ErrNoEC2 is returned by RefreshSpot when the provider has no EC2 client.
var ErrNoEC2 = errors.New("no EC2 client: spot prices come from the embedded catalog")

// RefreshOnDemand fetches every on-demand Linux price of the region from the
// Price List API.
func (p *Provider) RefreshOnDemand(ctx context.Context) error {
	if p.opts.Isolated || p.opts.Pricing == nil {
		return ErrIsolated
	}
	prices, err := p.fetchOnDemand(ctx)
	if err != nil {
		return fmt.Errorf("refreshing on-demand prices from the Price List API: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onDemand == nil || !maps.Equal(p.onDemand, prices) {
		p.seq++
	}
	p.onDemand = prices
	p.status.OnDemandSource = SourceAPI
	p.status.OnDemandTypes = len(prices)
	p.status.OnDemandUpdated = p.opts.Clock.Now()
	return nil
}

// RefreshSpot fetches the current spot price of every type in every zone of
// the region from EC2.
func (p *Provider) RefreshSpot(ctx context.Context) error {
	if p.opts.EC2 == nil {
		return ErrNoEC2
	}
	prices, err := p.fetchSpot(ctx)
	if err != nil {
		return fmt.Errorf("refreshing spot prices from EC2 DescribeSpotPriceHistory: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spot == nil || !maps.Equal(p.spot, prices) {
		p.seq++
	}
	p.spot = prices
	p.status.SpotSource = SourceAPI
	p.status.SpotOfferings = len(prices)
	p.status.SpotUpdated = p.opts.Clock.Now()
	return nil
}

// Filters of the on-demand queries: Linux with no pre-installed software,
// and "Used" capacity (the price of a running instance, not of an unused
// reservation or a capacity block). The Price List files bare-metal sizes
// under Dedicated tenancy, as "Compute Instance (bare metal)": a second
// query reads them, or no metal type would have a price.
func onDemandFilters(region string) [][]pricingtypes.Filter {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	common := func(tenancy string) []pricingtypes.Filter {
		return []pricingtypes.Filter{
			term("regionCode", region),
			term("operatingSystem", "Linux"),
			term("tenancy", tenancy),
			term("preInstalledSw", "NA"),
			term("capacitystatus", "Used"),
		}
	}
	return [][]pricingtypes.Filter{
		common("Shared"),
		append(common("Dedicated"), term("productFamily", "Compute Instance (bare metal)")),
	}
}

// product is the part of one PriceList entry that is read: the Price List
// API returns each product as a JSON document inside a string.
type product struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

func (p *Provider) fetchOnDemand(ctx context.Context) (map[string]float64, error) {
	prices := map[string]float64{}
	for _, filters := range onDemandFilters(p.opts.Region) {
		if err := p.readPrices(ctx, filters, prices); err != nil {
			return nil, err
		}
	}
	if len(prices) == 0 {
		return nil, fmt.Errorf("no on-demand price for any instance type in region %q", p.opts.Region)
	}
	return prices, nil
}

// currency is the currency of a region's prices: the China regions are
// billed in yuan, and their Price List and spot prices are in CNY, as
// Karpenter reads them. Read in USD, on-demand would be missing there, or,
// against spot's CNY, seven times cheaper than it is.
func currency(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "CNY"
	}
	return "USD"
}

// readPrices adds the prices of one query's products to prices.
func (p *Provider) readPrices(ctx context.Context, filters []pricingtypes.Filter, prices map[string]float64) error {
	in := &awspricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"),
		Filters:       filters,
	}
	cur := currency(p.opts.Region)
	pages := awspricing.NewGetProductsPaginator(p.opts.Pricing, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for i, doc := range out.PriceList {
			var prod product
			if err := json.Unmarshal([]byte(doc), &prod); err != nil {
				return fmt.Errorf("PriceList entry %d is not a product document: %w", i, err)
			}
			it := prod.Product.Attributes.InstanceType
			if it == "" {
				continue
			}
			for _, term := range prod.Terms.OnDemand {
				for _, dim := range term.PriceDimensions {
					amount, ok := dim.PricePerUnit[cur]
					if !ok {
						continue
					}
					price, err := strconv.ParseFloat(amount, 64)
					if err != nil {
						return fmt.Errorf("%s: pricePerUnit.%s %q is not a number: %w", it, cur, amount, err)
					}
					// A zero price is a placeholder for a type not sold
					// on demand in the region. Of two products for one
					// type the cheaper is kept, so the result does not
					// depend on the order of the pages.
					if price <= 0 {
						continue
					}
					if old, seen := prices[it]; !seen || price < old {
						prices[it] = price
					}
				}
			}
		}
	}
	return nil
}

func (p *Provider) fetchSpot(ctx context.Context) (map[spotKey]float64, error) {
	// With a start time of now EC2 returns, for each type and zone, the
	// price in effect now (and any change since), not days of history.
	// Both Linux descriptions: EC2 reports an account's VPC-only zones
	// under "Linux/UNIX (Amazon VPC)", and the latest of the two is the
	// price in effect.
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           aws.Time(p.opts.Clock.Now()),
	}
	type stamped struct {
		price float64
		at    time.Time
	}
	latest := map[spotKey]stamped{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.opts.EC2, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, h := range out.SpotPriceHistory {
			k := spotKey{string(h.InstanceType), aws.ToString(h.AvailabilityZone)}
			if k.instanceType == "" || k.zone == "" || h.SpotPrice == nil {
				continue
			}
			price, err := strconv.ParseFloat(*h.SpotPrice, 64)
			if err != nil {
				return nil, fmt.Errorf("%s in %s: SpotPrice %q is not a number: %w", k.instanceType, k.zone, *h.SpotPrice, err)
			}
			at := aws.ToTime(h.Timestamp)
			if old, seen := latest[k]; !seen || at.After(old.at) {
				latest[k] = stamped{price, at}
			}
		}
	}
	if len(latest) == 0 {
		return nil, fmt.Errorf("no spot price for any instance type in region %q", p.opts.Region)
	}
	prices := make(map[spotKey]float64, len(latest))
	for k, s := range latest {
		prices[k] = s.price
	}
	return prices, nil
}

// Start refreshes prices now and then on OnDemandInterval and SpotInterval
// until ctx ends, and returns nil then. It fits controller-runtime's
// manager as a Runnable.
func (p *Provider) Start(ctx context.Context) error {
	onDemandDue, spotDue := p.opts.Clock.Now(), p.opts.Clock.Now()
	for {
		now := p.opts.Clock.Now()
		if !now.Before(onDemandDue) {
			onDemandDue = now.Add(p.refreshLogged(ctx, "on-demand", p.RefreshOnDemand, OnDemandInterval))
		}
		if !now.Before(spotDue) {
			spotDue = now.Add(p.refreshLogged(ctx, "spot", p.RefreshSpot, SpotInterval))
		}
		next := onDemandDue
		if spotDue.Before(next) {
			next = spotDue
		}
		t := p.opts.Clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// NeedLeaderElection is false: every replica keeps prices warm, so a new
// leader ranks offerings with fresh prices at once.
func (p *Provider) NeedLeaderElection() bool { return false }

func (p *Provider) refreshLogged(ctx context.Context, what string, refresh func(context.Context) error, interval time.Duration) time.Duration {
	err := refresh(ctx)
	switch {
	case errors.Is(err, ErrIsolated), errors.Is(err, ErrNoEC2):
		// Not configured, not failing: nothing to retry.
		return OnDemandInterval
	case err != nil:
		// A refused call is the operator's to fix, and the catalog's prices
		// hide it otherwise: the error names the IAM action to allow.
		p.opts.Log.Error(awsclient.ExplainPermission(err), "prices not refreshed; keeping the last good ones", "prices", what, "status", p.Status())
		return p.opts.RetryInterval
	}
	p.opts.Log.V(1).Info("prices refreshed", "prices", what, "status", p.Status())
	return interval
}
