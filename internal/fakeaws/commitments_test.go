package fakeaws_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/savingsplans"
	sptypes "github.com/aws/aws-sdk-go-v2/service/savingsplans/types"
)

// m5.large's on-demand price in the catalog (us-east-1), and the rates the
// documented discounts give it: a 1-year standard RI saves 40%, a 1-year
// Compute Savings Plan 30%.
const (
	m5LargeOnDemand = 0.096
	m5LargeRI1y     = m5LargeOnDemand * 0.6
	m5LargeCompute  = m5LargeOnDemand * 0.7
)

// Commitments are bought as a user buys them, with the AWS CLI, and read
// back by it and by the SDK: Reserved Instances from their offerings, a
// Compute Savings Plan from its offering, with its rates.
func TestCommitmentsBoughtAndReadBack(t *testing.T) {
	ctx := context.Background()
	list := func(v any) []any { l, _ := v.([]any); return l }
	field := func(v any, k string) any { m, _ := v.(map[string]any); return m[k] }

	// Reserved Instances: one offering per class, term, payment and scope.
	offers := list(awsCLI(t, "ec2", "describe-reserved-instances-offerings", "--instance-type", "m5.large", "--offering-class", "standard",
		"--offering-type", "No Upfront", "--product-description", "Linux/UNIX", "--filters", "Name=duration,Values=31536000", "Name=scope,Values=Region")["ReservedInstancesOfferings"])
	if len(offers) != 1 {
		t.Fatalf("%d offerings, want one regional 1-year standard No Upfront m5.large: %v", len(offers), offers)
	}
	hourly := field(list(field(offers[0], "RecurringCharges"))[0], "Amount").(float64)
	if math.Abs(hourly-m5LargeRI1y) > 1e-9 || field(offers[0], "FixedPrice").(float64) != 0 {
		t.Errorf("offering charges %v/h and %v upfront, want %v/h and none", hourly, field(offers[0], "FixedPrice"), m5LargeRI1y)
	}
	bought := awsCLI(t, "ec2", "purchase-reserved-instances-offering", "--reserved-instances-offering-id", field(offers[0], "ReservedInstancesOfferingId").(string), "--instance-count", "8")
	riID, _ := bought["ReservedInstancesId"].(string)
	ris := list(awsCLI(t, "ec2", "describe-reserved-instances", "--filters", "Name=state,Values=active", "Name=reserved-instances-id,Values="+riID)["ReservedInstances"])
	if len(ris) != 1 || field(ris[0], "InstanceCount").(float64) != 8 || field(ris[0], "InstanceType") != "m5.large" || field(ris[0], "Scope") != "Region" {
		t.Fatalf("the CLI reads back %v, want 8 regional m5.large", ris)
	}
	sdk, err := ec2.NewFromConfig(cfg(t)).DescribeReservedInstances(ctx, &ec2.DescribeReservedInstancesInput{ReservedInstancesIds: []string{riID}})
	if err != nil || len(sdk.ReservedInstances) != 1 {
		t.Fatalf("the SDK reads back %+v (%v)", sdk, err)
	}
	r := sdk.ReservedInstances[0]
	if aws.ToInt32(r.InstanceCount) != 8 || r.State != ec2types.ReservedInstanceStateActive || r.Scope != ec2types.ScopeRegional ||
		r.OfferingClass != ec2types.OfferingClassTypeStandard || aws.ToTime(r.End).Sub(aws.ToTime(r.Start)).Hours() != 365*24 {
		t.Errorf("the SDK reads %+v", r)
	}
	if _, err := ec2.NewFromConfig(cfg(t)).PurchaseReservedInstancesOffering(ctx, &ec2.PurchaseReservedInstancesOfferingInput{
		ReservedInstancesOfferingId: aws.String("not-an-offering"), InstanceCount: aws.Int32(1)}); err == nil {
		t.Error("an offering never described was sold")
	}

	// A Compute Savings Plan of $1.00/h.
	spOffers := list(awsCLI(t, "savingsplans", "describe-savings-plans-offerings", "--plan-types", "Compute", "--durations", "31536000", "--payment-options", "No Upfront")["searchResults"])
	if len(spOffers) != 1 {
		t.Fatalf("%d Compute offerings, want one 1-year No Upfront: %v", len(spOffers), spOffers)
	}
	plan := awsCLI(t, "savingsplans", "create-savings-plan", "--savings-plan-offering-id", field(spOffers[0], "offeringId").(string), "--commitment", "1.00")
	planID, _ := plan["savingsPlanId"].(string)
	plans := list(awsCLI(t, "savingsplans", "describe-savings-plans", "--savings-plan-ids", planID, "--states", "active")["savingsPlans"])
	if len(plans) != 1 || field(plans[0], "commitment") != "1.0" || field(plans[0], "savingsPlanType") != "Compute" {
		t.Fatalf("the CLI reads back %v, want one active Compute plan of 1.0/h", plans)
	}
	rates := list(awsCLI(t, "savingsplans", "describe-savings-plan-rates", "--savings-plan-id", planID,
		"--filters", "name=region,values=us-east-1", "name=instanceType,values=m5.large")["searchResults"])
	if len(rates) != 1 {
		t.Fatalf("%d rates for m5.large in us-east-1, want 1: %v", len(rates), rates)
	}
	if rate, _ := strconv.ParseFloat(field(rates[0], "rate").(string), 64); math.Abs(rate-m5LargeCompute) > 1e-9 {
		t.Errorf("rate %v, want %v", rate, m5LargeCompute)
	}
	sp := savingsplans.NewFromConfig(cfg(t))
	got, err := sp.DescribeSavingsPlanRates(ctx, &savingsplans.DescribeSavingsPlanRatesInput{SavingsPlanId: aws.String(planID),
		Filters: []sptypes.SavingsPlanRateFilter{{Name: sptypes.SavingsPlanRateFilterNameRegion, Values: []string{"us-east-1"}}}})
	if err != nil || len(got.SearchResults) < 100 {
		t.Fatalf("the SDK reads %d rates in us-east-1 (%v), want every type's", len(got.SearchResults), err)
	}
	if _, err := sp.DescribeSavingsPlans(ctx, &savingsplans.DescribeSavingsPlansInput{SavingsPlanIds: []string{planID}}); err != nil {
		t.Errorf("the SDK cannot read the plan: %v", err)
	}
}

// cfg is the SDK's default configuration for the region, with the
// endpoint from AWS_ENDPOINT_URL as the product reads it.
func cfg(t *testing.T) aws.Config {
	t.Helper()
	c, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
