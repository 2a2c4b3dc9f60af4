package aws

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/test/framework"
)

// buyRIs buys count regional 1-year standard No Upfront RIs of the type
// with awscli, as a user buys them: the offering described, then
// purchased.
func buyRIs(t *testing.T, f *fakeaws.Server, instanceType string, count string) {
	t.Helper()
	var offers struct {
		ReservedInstancesOfferings []struct{ ReservedInstancesOfferingId string }
	}
	out := awsCLIJSON(t, f, &offers, "ec2", "describe-reserved-instances-offerings", "--instance-type", instanceType, "--offering-class", "standard",
		"--offering-type", "No Upfront", "--product-description", "Linux/UNIX", "--filters", "Name=duration,Values=31536000", "Name=scope,Values=Region")
	if len(offers.ReservedInstancesOfferings) != 1 {
		t.Fatalf("describe-reserved-instances-offerings: want one offering:\n%s", out)
	}
	awsCLI(t, f, "ec2", "purchase-reserved-instances-offering", "--reserved-instances-offering-id", offers.ReservedInstancesOfferings[0].ReservedInstancesOfferingId,
		"--instance-count", count)
}

// buySavingsPlan buys a 1-year No Upfront Compute Savings Plan of
// commitment dollars per hour with awscli.
func buySavingsPlan(t *testing.T, f *fakeaws.Server, commitment string) {
	t.Helper()
	var offers struct {
		SearchResults []struct {
			OfferingID string `json:"offeringId"`
		} `json:"searchResults"`
	}
	out := awsCLIJSON(t, f, &offers, "savingsplans", "describe-savings-plans-offerings", "--plan-types", "Compute", "--durations", "31536000",
		"--payment-options", "No Upfront")
	if len(offers.SearchResults) != 1 {
		t.Fatalf("describe-savings-plans-offerings: want one offering:\n%s", out)
	}
	awsCLI(t, f, "savingsplans", "create-savings-plan", "--savings-plan-offering-id", offers.SearchResults[0].OfferingID, "--commitment", commitment)
}

// teamReservation creates, with awscli, a capacity reservation of one
// m5.large in us-east-1a tagged with a team of its own, cancelled when the
// test ends, and returns the manifests of a class that selects it by that
// tag and a pool that allows reserved and on-demand capacity, and its ID.
func teamReservation(t *testing.T, f *fakeaws.Server) (manifests, id string) {
	t.Helper()
	team := fmt.Sprintf("ml-%d", time.Now().UnixNano())
	var created struct {
		CapacityReservation struct{ CapacityReservationId string }
	}
	out := awsCLIJSON(t, f, &created, "ec2", "create-capacity-reservation", "--instance-type", "m5.large", "--instance-platform", "Linux/UNIX",
		"--availability-zone", "us-east-1a", "--instance-count", "1", "--tag-specifications", "ResourceType=capacity-reservation,Tags=[{Key=team,Value="+team+"}]")
	id = created.CapacityReservation.CapacityReservationId
	if id == "" {
		t.Fatalf("create-capacity-reservation:\n%s", out)
	}
	t.Cleanup(func() { awsCLI(t, f, "ec2", "cancel-capacity-reservation", "--capacity-reservation-id", id) })
	manifests = strings.Replace(framework.PoolAndClass, "  securityGroupSelectorTerms:", "  capacityReservationSelectorTerms: [{tags: {team: "+team+"}}]\n  securityGroupSelectorTerms:", 1)
	return strings.Replace(manifests, "values: [on-demand]", "values: [reserved, on-demand]", 1), id
}
