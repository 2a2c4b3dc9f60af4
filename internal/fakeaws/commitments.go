package fakeaws

import (
	"strings"

	"github.com/google/uuid"
)

// Commitments (Reserved Instances and Savings Plans) are bought as a user
// buys them and priced from the catalog's on-demand prices at the
// discounts below. The figures are round numbers near AWS's published
// "up to" savings for general-purpose types in us-east-1, the same for
// every payment option (AWS gives a few points more for paying upfront):
// an EC2 Instance Savings Plan saves what a standard RI saves, a Compute
// Savings Plan what a convertible RI saves, as AWS's pricing pages pair
// them. docs/fake-aws.md lists them.
var commitmentDiscounts = map[string]map[int]float64{
	"standard":    {1: 0.40, 3: 0.60},
	"convertible": {1: 0.30, 3: 0.50},
	"EC2Instance": {1: 0.40, 3: 0.60},
	"Compute":     {1: 0.30, 3: 0.50},
}

const (
	yearSeconds = 31536000
	// linuxProduct is the one product description commitments are sold
	// for here: the catalog's prices are Linux's.
	linuxProduct = "Linux/UNIX"
)

var paymentOptions = []string{"No Upfront", "Partial Upfront", "All Upfront"}

// discountedRate is the hourly rate a commitment of that kind and term
// gives a type listed at onDemand.
func discountedRate(kind string, years int, onDemand float64) float64 {
	return onDemand * (1 - commitmentDiscounts[kind][years])
}

// offeringID names an offering by what it sells, so that describing it
// twice gives the same ID, as EC2's offering IDs are stable.
func offeringID(parts ...string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(strings.Join(parts, "|"))).String()
}

// family is the instance family of a type name: m5 of m5.large.
func family(instanceType string) string {
	f, _, _ := strings.Cut(instanceType, ".")
	return f
}
