package commitments

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/savingsplans"
	sptypes "github.com/aws/aws-sdk-go-v2/service/savingsplans/types"
	"github.com/aws/smithy-go"
	"github.com/go-logr/logr/funcr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// TestMain starts the local AWS endpoint (cmd/fake-aws's server, which
// sells commitments as AWS does) and points the SDK at it.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	f, err := fakeaws.Start(ctx, fakeaws.Options{ClusterName: "demo"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": f.URL(), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
		"AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true"} {
		os.Setenv(k, v)
	}
	code := m.Run()
	cancel()
	f.Stop()
	os.Exit(code)
}

func clientsOf(t *testing.T) *awsclient.Clients {
	t.Helper()
	c, err := awsclient.New(context.Background(), awsclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counting counts the Reserved Instance reads, and refuses them when
// denied is set, as IAM refuses a call the policy does not grant.
type counting struct {
	EC2
	calls  int
	denied bool
}

func (c *counting) DescribeReservedInstances(ctx context.Context, in *ec2.DescribeReservedInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeReservedInstancesOutput, error) {
	c.calls++
	if c.denied {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
	}
	return c.EC2.DescribeReservedInstances(ctx, in, opts...)
}

// buy purchases, through the endpoint as a user would, 8 regional m5.large
// standard RIs and a $1.00/h Compute Savings Plan.
func buy(t *testing.T, e *ec2.Client, sp *savingsplans.Client) {
	t.Helper()
	ctx := context.Background()
	offers, err := e.DescribeReservedInstancesOfferings(ctx, &ec2.DescribeReservedInstancesOfferingsInput{
		InstanceType: ec2types.InstanceTypeM5Large, OfferingClass: ec2types.OfferingClassTypeStandard, OfferingType: ec2types.OfferingTypeValuesNoUpfront,
		ProductDescription: ec2types.RIProductDescription("Linux/UNIX"), Filters: []ec2types.Filter{{Name: aws.String("scope"), Values: []string{"Region"}},
			{Name: aws.String("duration"), Values: []string{"31536000"}}}})
	if err != nil || len(offers.ReservedInstancesOfferings) != 1 {
		t.Fatalf("RI offerings %+v (%v)", offers, err)
	}
	if _, err := e.PurchaseReservedInstancesOffering(ctx, &ec2.PurchaseReservedInstancesOfferingInput{
		ReservedInstancesOfferingId: offers.ReservedInstancesOfferings[0].ReservedInstancesOfferingId, InstanceCount: aws.Int32(8)}); err != nil {
		t.Fatal(err)
	}
	spOffers, err := sp.DescribeSavingsPlansOfferings(ctx, &savingsplans.DescribeSavingsPlansOfferingsInput{
		PlanTypes: []sptypes.SavingsPlanType{sptypes.SavingsPlanTypeCompute}, Durations: []int64{31536000},
		PaymentOptions: []sptypes.SavingsPlanPaymentOption{sptypes.SavingsPlanPaymentOptionNoUpfront}})
	if err != nil || len(spOffers.SearchResults) != 1 {
		t.Fatalf("Savings Plan offerings %+v (%v)", spOffers, err)
	}
	if _, err := sp.CreateSavingsPlan(ctx, &savingsplans.CreateSavingsPlanInput{SavingsPlanOfferingId: spOffers.SearchResults[0].OfferingId, Commitment: aws.String("1.00")}); err != nil {
		t.Fatal(err)
	}
}

func TestGet(t *testing.T) {
	cases := []struct {
		name     string
		denied   bool
		wantRIs  int
		wantSaid string
	}{
		{name: "both read", wantRIs: 1},
		{name: "Reserved Instances refused", denied: true, wantSaid: "planning at list prices without the account's commitments: allow ec2:DescribeReservedInstances in the IAM policy"},
	}
	clients := clientsOf(t)
	buy(t, clients.EC2, clients.SavingsPlans)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			ctx := log.IntoContext(context.Background(), funcr.New(func(_, args string) { logs.WriteString(args + "\n") }, funcr.Options{}))
			clock := clocktesting.NewFakeClock(time.Now())
			reads := &counting{EC2: clients.EC2, denied: tc.denied}
			p := &Provider{EC2: reads, SavingsPlans: clients.SavingsPlans, Region: clients.Region, Clock: clock, Refresh: 5 * time.Minute}
			got, err := p.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.ReservedInstances) != tc.wantRIs {
				t.Fatalf("%d RI purchases, want %d: %+v", len(got.ReservedInstances), tc.wantRIs, got.ReservedInstances)
			}
			if tc.wantRIs > 0 {
				if ri := got.ReservedInstances[0]; ri.Type != "m5.large" || ri.Count != 8 || ri.Zone != "" {
					t.Errorf("RI %+v, want 8 regional m5.large", ri)
				}
			}
			if len(got.SavingsPlans) != 1 || got.SavingsPlans[0].EC2Instance || got.SavingsPlans[0].Commitment != 1 ||
				math.Abs(got.SavingsPlans[0].Rates["m5.large"]-0.0672) > 1e-9 {
				t.Fatalf("plans %+v, want one Compute plan of 1.0/h with m5.large at 0.0672", summary(got.SavingsPlans))
			}
			// Within the refresh interval the reading is kept; after it,
			// read again; a refusal is said once.
			clock.Step(time.Minute)
			_, _ = p.Get(ctx)
			clock.Step(5 * time.Minute)
			_, _ = p.Get(ctx)
			if reads.calls != 2 {
				t.Errorf("%d reads in three Gets across one refresh, want 2", reads.calls)
			}
			if n := strings.Count(logs.String(), "planning at list prices"); tc.wantSaid != "" && (n != 1 || !strings.Contains(logs.String(), tc.wantSaid)) {
				t.Errorf("said %d times, want once %q:\n%s", n, tc.wantSaid, logs.String())
			} else if tc.wantSaid == "" && n != 0 {
				t.Errorf("said %q with every call granted", logs.String())
			}
		})
	}
}

func summary(plans []commitment.SavingsPlan) []string {
	var out []string
	for _, p := range plans {
		out = append(out, p.ID)
	}
	return out
}
