// Package capacityreservation resolves an EC2NodeClass's
// capacityReservationSelectorTerms to the active On-Demand Capacity
// Reservations and Capacity Blocks its nodes may launch into, and keeps
// count of how many instances each can still take.
package capacityreservation

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/selector"
)

// Node labels of an instance in a reservation, Karpenter's.
const (
	LabelID            = awsv1.Group + "/capacity-reservation-id"
	LabelType          = awsv1.Group + "/capacity-reservation-type"
	LabelInterruptible = awsv1.Group + "/capacity-reservation-interruptible"
)

// EC2API is the part of EC2 the provider calls.
type EC2API interface {
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// Provider resolves reservations and tracks what they have left. It is
// safe for concurrent use.
type Provider struct {
	ec2   EC2API
	clock clock.PassiveClock

	mu sync.Mutex
	// available is each reservation's free instance count as EC2 last said,
	// less the launches made into it since.
	available map[string]int32
}

// NewProvider returns a provider over api.
func NewProvider(api EC2API, clk clock.PassiveClock) *Provider {
	return &Provider{ec2: api, clock: clk, available: map[string]int32{}}
}

// StateExpiring is status.capacityReservations[].state of a Capacity
// Block within ExpirationPeriod of its end (Karpenter's value); the others
// are "active".
const StateExpiring = "expiring"

// List returns the active reservations nc selects, by id, and refreshes
// their free counts. Terms are ORed; a term's fields are ANDed.
func (p *Provider) List(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.CapacityReservation, error) {
	if len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, nil
	}
	byID := map[string]ec2types.CapacityReservation{}
	for _, term := range nc.Spec.CapacityReservationSelectorTerms {
		in := &ec2.DescribeCapacityReservationsInput{Filters: append(selector.TagFilters(term.Tags), selector.Filter("state", "active"))}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		}
		if term.OwnerID != "" {
			in.Filters = append(in.Filters, selector.Filter("owner-id", term.OwnerID))
		}
		if term.InstanceMatchCriteria != "" {
			in.Filters = append(in.Filters, selector.Filter("instance-match-criteria", term.InstanceMatchCriteria))
		}
		pages := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, in)
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing capacity reservations for EC2NodeClass %q: %w", nc.Name, err)
			}
			for _, r := range out.CapacityReservations {
				if r.State == ec2types.CapacityReservationStateActive {
					byID[aws.ToString(r.CapacityReservationId)] = r
				}
			}
		}
	}
	// Terms that select nothing are no error, as in Karpenter: the class
	// stays Ready with no reservations, and its pools launch on-demand and
	// spot as before. A reservation that ends or is cancelled must not
	// stop every pool on the class.
	if len(byID) == 0 {
		return nil, nil
	}
	now := p.clock.Now()
	out := make([]awsv1.CapacityReservation, 0, len(byID))
	p.mu.Lock()
	for id, r := range byID {
		p.available[id] = aws.ToInt32(r.AvailableInstanceCount)
		cr := awsv1.CapacityReservation{
			ID: id, InstanceType: aws.ToString(r.InstanceType), AvailabilityZone: aws.ToString(r.AvailabilityZone),
			OwnerID: aws.ToString(r.OwnerId), InstanceMatchCriteria: string(r.InstanceMatchCriteria),
			ReservationType: string(r.ReservationType), State: string(r.State), Interruptible: aws.ToBool(r.Interruptible),
		}
		if cr.ReservationType == "" {
			cr.ReservationType = string(ec2types.CapacityReservationTypeDefault)
		}
		if r.EndDate != nil {
			end := metav1.NewTime(*r.EndDate)
			cr.EndTime = &end
		}
		if Expiring(cr, now) {
			cr.State = StateExpiring
		}
		out = append(out, cr)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Available is how many more instances the reservation can take, as far
// as Joiner knows; a reservation never listed has none.
func (p *Provider) Available(id string) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available[id]
}

// Launched counts an instance launched into the reservation, so the next
// plan does not count on its room before the next refresh shows it.
func (p *Provider) Launched(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.available[id] > 0 {
		p.available[id]--
	}
}

// Returned gives back one instance's room, once its instance has ended,
// until the next refresh says what EC2 counts.
func (p *Provider) Returned(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, known := p.available[id]; known {
		p.available[id]++
	}
}

// Exhausted records EC2's word that the reservation is full.
func (p *Provider) Exhausted(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.available[id] = 0
}

// ExpirationPeriod is how long before its end a Capacity Block is
// "expiring", as Karpenter marks it: EC2 begins terminating a block's
// instances 30 minutes before the end, so nothing more launches into it
// from 40 minutes before, and its nodes are drained then.
const ExpirationPeriod = 40 * time.Minute

// Expiring reports a reservation that takes no more launches at now: one
// that has ended (EC2 stops honouring it, whatever the last description
// said), or a Capacity Block within ExpirationPeriod of its end.
func Expiring(r awsv1.CapacityReservation, now time.Time) bool {
	if r.EndTime == nil {
		return false
	}
	if r.ReservationType == string(ec2types.CapacityReservationTypeCapacityBlock) {
		return !now.Before(r.EndTime.Add(-ExpirationPeriod))
	}
	return !r.EndTime.After(now)
}
