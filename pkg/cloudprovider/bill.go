package cloudprovider

import "context"

// Biller is a cloud provider that knows what the bill saves when a
// NodeClaim goes under the account's commitments (Reserved Instances,
// Savings Plans): less than its offering's list price, or nothing.
// Consolidation prices its candidates with it.
type Biller interface {
	// MarginalPrices are the NodeClaims' savings in $/h by name; nil
	// when list prices hold.
	MarginalPrices(ctx context.Context) (map[string]float64, error)
}
