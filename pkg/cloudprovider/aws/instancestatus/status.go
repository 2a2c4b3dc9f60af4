// Package instancestatus reads EC2's status checks and scheduled events
// for running instances. EventBridge carries only some of what EC2 knows
// about an instance's health: a failed system or instance status check
// sends nothing to the interruption queue, and a scheduled event may be
// created before the AWS Health notification arrives. Polling
// DescribeInstanceStatus finds both.
package instancestatus

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EC2API is the part of EC2 this package calls.
type EC2API interface {
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// Category is the status check that found an instance unhealthy, spelled
// as the category label of karpenter_interruption_instance_status_unhealthy_total.
type Category string

const (
	// CategoryInstance is the instance status check: the guest (kernel,
	// network configuration, memory) is broken.
	CategoryInstance Category = "instance_status"
	// CategorySystem is the system status check: the host under the
	// instance is broken, and only a new instance helps.
	CategorySystem Category = "system_status"
	// CategoryEvent is a scheduled event: AWS will reboot, stop or retire
	// the instance at a set time.
	CategoryEvent Category = "event_status"
)

// Forceful reports whether the category means the node is already
// broken: its pods are not serving, so waiting for PDBs only keeps them
// down longer. A scheduled event leaves time for a graceful drain.
func (c Category) Forceful() bool { return c == CategoryInstance || c == CategorySystem }

// UnhealthyThreshold is how long a status check must have failed before
// the instance is replaced, as in Karpenter: EC2 reports a check failed on
// its first bad sample, and many recover within a minute or two.
const UnhealthyThreshold = 120 * time.Second

// Finding is one unhealthy instance, by category.
type Finding struct {
	InstanceID string
	Category   Category
	// Detail says what EC2 reported, for logs and events: the failed
	// checks, or the event's code, description and start.
	Detail string
	// Since is when EC2 says the earliest failed check began failing
	// (its impairedSince); zero for an event, and for a check EC2 gave no
	// start for, which therefore counts as failed long enough.
	Since time.Time
}

// Due reports whether the finding is to be acted on at now: a scheduled
// event at once (AWS has set its date), a failed check once it has failed
// for UnhealthyThreshold.
func (f Finding) Due(now time.Time) bool {
	return !f.Category.Forceful() || now.Sub(f.Since) >= UnhealthyThreshold
}

// Key names a finding across polls: one instance's one category.
type Key struct {
	InstanceID string
	Category   Category
}

// Key returns the finding's key.
func (f Finding) Key() Key { return Key{f.InstanceID, f.Category} }

// statusFilters are the three questions asked of DescribeInstanceStatus.
// EC2 ANDs filters of different names, so a failed instance check, a
// failed system check and a scheduled event are asked separately; asking
// with no filter would read every instance in the region each poll.
var statusFilters = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: []string{
		string(ec2types.EventCodeInstanceReboot), string(ec2types.EventCodeSystemReboot), string(ec2types.EventCodeSystemMaintenance),
		string(ec2types.EventCodeInstanceRetirement), string(ec2types.EventCodeInstanceStop),
	}}},
}

// Unhealthy lists the findings for the instances EC2 reports a failed
// check or a scheduled event for; an instance with several gets one per
// category, most severe first (system, instance, event).
func Unhealthy(ctx context.Context, api EC2API) ([]Finding, error) {
	seen := map[string]bool{}
	var out []Finding
	for _, filters := range statusFilters {
		pager := ec2.NewDescribeInstanceStatusPaginator(api, &ec2.DescribeInstanceStatusInput{Filters: filters, MaxResults: aws.Int32(1000)})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, s := range page.InstanceStatuses {
				if id := aws.ToString(s.InstanceId); !seen[id] {
					seen[id] = true
					out = append(out, Classify(s)...)
				}
			}
		}
	}
	return out, nil
}

// Classify reads one instance's status. A check counts only when one of
// its details "failed", as Karpenter reads it: "initializing" and
// "insufficient-data" are what a healthy instance reports while it boots
// or while EC2 catches up. An event whose description EC2 has marked
// "[Completed]" or "[Canceled]" is over.
func Classify(s ec2types.InstanceStatus) []Finding {
	id := aws.ToString(s.InstanceId)
	var out []Finding
	if d, since, bad := failed(s.SystemStatus); bad {
		out = append(out, Finding{InstanceID: id, Category: CategorySystem, Detail: d, Since: since})
	}
	if d, since, bad := failed(s.InstanceStatus); bad {
		out = append(out, Finding{InstanceID: id, Category: CategoryInstance, Detail: d, Since: since})
	}
	var events []string
	for _, e := range s.Events {
		desc := aws.ToString(e.Description)
		if strings.HasPrefix(desc, "[Completed]") || strings.HasPrefix(desc, "[Canceled]") {
			continue
		}
		text := string(e.Code)
		if desc != "" {
			text += " (" + desc + ")"
		}
		if e.NotBefore != nil {
			text += " not before " + e.NotBefore.UTC().Format("2006-01-02T15:04:05Z")
		}
		events = append(events, text)
	}
	if len(events) > 0 {
		sort.Strings(events)
		out = append(out, Finding{InstanceID: id, Category: CategoryEvent, Detail: "scheduled event " + strings.Join(events, ", ")})
	}
	return out
}

// failed reports whether a check failed, naming its failed details, and
// when the earliest of them began failing.
func failed(s *ec2types.InstanceStatusSummary) (string, time.Time, bool) {
	if s == nil {
		return "", time.Time{}, false
	}
	var names []string
	var since time.Time
	first := true
	for _, d := range s.Details {
		if d.Status != ec2types.StatusTypeFailed {
			continue
		}
		names = append(names, string(d.Name))
		at := aws.ToTime(d.ImpairedSince)
		if first || at.Before(since) {
			since = at
		}
		first = false
	}
	if len(names) == 0 {
		return "", time.Time{}, false
	}
	sort.Strings(names)
	return "impaired: " + strings.Join(names, ", ") + " failed", since, true
}
