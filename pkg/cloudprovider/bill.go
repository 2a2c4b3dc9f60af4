package cloudprovider

import "context"

// Biller is a cloud provider that knows the bill under the account's
// commitments (Reserved Instances, Savings Plans): what each NodeClaim
// costs there, and what it saves when it goes. Consolidation prices its
// candidates with it; the cost metrics and the NodePools' spend caps count
// with it.
type Biller interface {
	// Bill is the NodeClaims' effective and marginal prices and the
	// commitments' use; the zero Bill when list prices hold.
	Bill(ctx context.Context) (Bill, error)
}

// Bill is the hour's bill as the commitments shape it.
type Bill struct {
	// Effective is each NodeClaim's share of the bill in $/h, by name:
	// its list price less what the commitments cover. A NodeClaim left
	// out costs its list price.
	Effective map[string]float64
	// Saving is what the bill saves per hour when the named NodeClaims go
	// together and the others stay (commitment.Savings): a node the RIs
	// cover saves nothing. Nil when list prices hold.
	Saving func(names []string) float64
	// Commitments is how much of each commitment the NodeClaims use.
	Commitments []CommitmentUse
}

// CommitmentUse is one commitment's use.
type CommitmentUse struct {
	ID string
	// Kind is "reserved-instance" or "savings-plan".
	Kind string
	// Used and Total are in the commitment's unit: instances (a zonal
	// RI), normalization units (a regional RI) or $/h (a Savings Plan).
	Used, Total float64
}

// Kinds of CommitmentUse.
const (
	CommitmentReservedInstance = "reserved-instance"
	CommitmentSavingsPlan      = "savings-plan"
)
