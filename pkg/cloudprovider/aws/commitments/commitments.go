// Package commitments reads the account's active Reserved Instances and
// Savings Plans (with their rates in the region) into pkg/commitment's
// terms, cached for a refresh interval. Only what Joiner launches is read:
// Linux on shared (default) tenancy.
package commitments

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/savingsplans"
	sptypes "github.com/aws/aws-sdk-go-v2/service/savingsplans/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// EC2 is the call Reserved Instances are read with.
type EC2 interface {
	DescribeReservedInstances(ctx context.Context, in *ec2.DescribeReservedInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeReservedInstancesOutput, error)
}

// SavingsPlans are the calls plans and their rates are read with.
type SavingsPlans interface {
	DescribeSavingsPlans(ctx context.Context, in *savingsplans.DescribeSavingsPlansInput, opts ...func(*savingsplans.Options)) (*savingsplans.DescribeSavingsPlansOutput, error)
	DescribeSavingsPlanRates(ctx context.Context, in *savingsplans.DescribeSavingsPlanRatesInput, opts ...func(*savingsplans.Options)) (*savingsplans.DescribeSavingsPlanRatesOutput, error)
}

// linux is the product description of what Joiner launches.
const linux = "Linux/UNIX"

// Provider caches the region's commitments.
type Provider struct {
	EC2          EC2
	SavingsPlans SavingsPlans
	Region       string
	Clock        clock.Clock
	// Refresh is how long a reading is kept.
	Refresh time.Duration

	mu     sync.Mutex
	at     time.Time
	cached commitment.Commitments
	// said is whether a refusal has been said: once per process.
	said bool
}

// Get returns the commitments, read again once Refresh has passed. A read
// that fails keeps the last good one; a refused one (the IAM policies of
// Karpenter's stacks grant none of the calls) is said once, in one line
// naming what to allow, and that kind of commitment is left out: Joiner
// plans at list prices for it.
func (p *Provider) Get(ctx context.Context) (commitment.Commitments, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Clock.Now()
	if !p.at.IsZero() && now.Sub(p.at) < p.Refresh {
		return p.cached, nil
	}
	var out commitment.Commitments
	var refused []string
	ris, err := p.reservedInstances(ctx)
	switch {
	case awsclient.IsAccessDenied(err):
		refused = append(refused, "ec2:DescribeReservedInstances")
	case err != nil:
		return p.cached, err
	}
	out.ReservedInstances = ris
	plans, err := p.savingsPlans(ctx)
	switch {
	case awsclient.IsAccessDenied(err):
		refused = append(refused, "savingsplans:DescribeSavingsPlans", "savingsplans:DescribeSavingsPlanRates")
	case err != nil:
		return p.cached, err
	}
	out.SavingsPlans = plans
	if len(refused) > 0 && !p.said {
		p.said = true
		others := ""
		if len(refused) > 1 {
			others = " (and " + strings.Join(refused[1:], ", ") + ")"
		}
		log.FromContext(ctx).Info(fmt.Sprintf("planning at list prices without the account's commitments: allow %s in the IAM policy of the role Joiner runs as%s; Joiner's stack grants them, Karpenter's do not",
			refused[0], others))
	}
	p.cached, p.at = out, now
	return out, nil
}

func (p *Provider) reservedInstances(ctx context.Context) ([]commitment.ReservedInstance, error) {
	out, err := p.EC2.DescribeReservedInstances(ctx, &ec2.DescribeReservedInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("state"), Values: []string{"active"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("reading Reserved Instances: %w", err)
	}
	var ris []commitment.ReservedInstance
	for _, r := range out.ReservedInstances {
		// A VPC-era description ("Linux/UNIX (Amazon VPC)") is Linux too.
		if r.ProductDescription != linux && r.ProductDescription != "Linux/UNIX (Amazon VPC)" {
			continue
		}
		if r.InstanceTenancy != "" && r.InstanceTenancy != ec2types.TenancyDefault {
			continue
		}
		ri := commitment.ReservedInstance{ID: aws.ToString(r.ReservedInstancesId), Type: string(r.InstanceType), Count: int(aws.ToInt32(r.InstanceCount))}
		if r.Scope == ec2types.ScopeAvailabilityZone {
			ri.Zone = aws.ToString(r.AvailabilityZone)
		}
		ris = append(ris, ri)
	}
	return ris, nil
}

func (p *Provider) savingsPlans(ctx context.Context) ([]commitment.SavingsPlan, error) {
	var plans []sptypes.SavingsPlan
	var token *string
	for {
		out, err := p.SavingsPlans.DescribeSavingsPlans(ctx, &savingsplans.DescribeSavingsPlansInput{
			States: []sptypes.SavingsPlanState{sptypes.SavingsPlanStateActive}, NextToken: token})
		if err != nil {
			return nil, fmt.Errorf("reading Savings Plans: %w", err)
		}
		plans = append(plans, out.SavingsPlans...)
		if token = out.NextToken; aws.ToString(token) == "" {
			break
		}
	}
	var out []commitment.SavingsPlan
	for _, sp := range plans {
		ec2Instance := sp.SavingsPlanType == sptypes.SavingsPlanTypeEc2Instance
		if ec2Instance && aws.ToString(sp.Region) != p.Region {
			continue // an EC2 Instance plan covers its own region alone
		}
		if sp.SavingsPlanType != sptypes.SavingsPlanTypeCompute && !ec2Instance {
			continue // SageMaker and Database plans cover no instance
		}
		commit, err := strconv.ParseFloat(aws.ToString(sp.Commitment), 64)
		if err != nil {
			return nil, fmt.Errorf("savings plan %s: commitment %q: %w", aws.ToString(sp.SavingsPlanId), aws.ToString(sp.Commitment), err)
		}
		rates, err := p.rates(ctx, aws.ToString(sp.SavingsPlanId))
		if err != nil {
			return nil, err
		}
		out = append(out, commitment.SavingsPlan{ID: aws.ToString(sp.SavingsPlanId), EC2Instance: ec2Instance, Commitment: commit, Rates: rates})
	}
	return out, nil
}

// rates are the plan's hourly rates per instance type in the region, for
// Linux on shared tenancy.
func (p *Provider) rates(ctx context.Context, id string) (map[string]float64, error) {
	rates := map[string]float64{}
	var token *string
	for {
		out, err := p.SavingsPlans.DescribeSavingsPlanRates(ctx, &savingsplans.DescribeSavingsPlanRatesInput{
			SavingsPlanId: aws.String(id), NextToken: token, MaxResults: aws.Int32(1000),
			Filters: []sptypes.SavingsPlanRateFilter{
				{Name: sptypes.SavingsPlanRateFilterNameRegion, Values: []string{p.Region}},
				{Name: sptypes.SavingsPlanRateFilterNameProductDescription, Values: []string{linux}},
				{Name: sptypes.SavingsPlanRateFilterNameTenancy, Values: []string{"shared"}},
			}})
		if err != nil {
			return nil, fmt.Errorf("reading the rates of savings plan %s: %w", id, err)
		}
		for _, r := range out.SearchResults {
			if r.ProductType != sptypes.SavingsPlanProductTypeEc2 {
				continue
			}
			var typ string
			for _, prop := range r.Properties {
				if prop.Name == sptypes.SavingsPlanRatePropertyKeyInstanceType {
					typ = aws.ToString(prop.Value)
				}
			}
			rate, err := strconv.ParseFloat(aws.ToString(r.Rate), 64)
			if typ == "" || err != nil {
				continue
			}
			rates[typ] = rate
		}
		if token = out.NextToken; aws.ToString(token) == "" {
			return rates, nil
		}
	}
}
