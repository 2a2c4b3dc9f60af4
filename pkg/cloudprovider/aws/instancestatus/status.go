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

// Finding is one unhealthy instance, by category.
type Finding struct {
	InstanceID string
	Category   Category
	// Detail says what EC2 reported, for logs and events: the failed
	// checks, or the event's code, description and start.
	Detail string
}

// Unhealthy lists the findings for every instance in the region that EC2
// reports on; an instance with several gets one per category, most severe
// first (system, instance, event).
func Unhealthy(ctx context.Context, api EC2API) ([]Finding, error) {
	var out []Finding
	pager := ec2.NewDescribeInstanceStatusPaginator(api, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(1000)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range page.InstanceStatuses {
			out = append(out, Classify(s)...)
		}
	}
	return out, nil
}

// Classify reads one instance's status. Only "impaired" fails a check:
// "initializing" and "insufficient-data" are what a healthy instance
// reports while it boots or while EC2 catches up. An event whose
// description EC2 has marked "[Completed]" or "[Canceled]" is over.
func Classify(s ec2types.InstanceStatus) []Finding {
	id := aws.ToString(s.InstanceId)
	var out []Finding
	if d, bad := impaired(s.SystemStatus); bad {
		out = append(out, Finding{InstanceID: id, Category: CategorySystem, Detail: d})
	}
	if d, bad := impaired(s.InstanceStatus); bad {
		out = append(out, Finding{InstanceID: id, Category: CategoryInstance, Detail: d})
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

// impaired reports whether a summary failed, naming the failed checks.
func impaired(s *ec2types.InstanceStatusSummary) (string, bool) {
	if s == nil || s.Status != ec2types.SummaryStatusImpaired {
		return "", false
	}
	var failed []string
	for _, d := range s.Details {
		if d.Status == ec2types.StatusTypeFailed {
			failed = append(failed, string(d.Name))
		}
	}
	if len(failed) == 0 {
		return "impaired", true
	}
	sort.Strings(failed)
	return "impaired: " + strings.Join(failed, ", ") + " failed", true
}
