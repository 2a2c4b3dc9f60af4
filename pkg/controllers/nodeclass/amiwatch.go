package nodeclass

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/amifamily"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// AMICheckPeriod is how often AMIWatch reads the parameters behind the
// classes' @latest aliases.
const AMICheckPeriod = 30 * time.Second

// AMIWatch notices that AWS has released a new image behind an alias
// (al2023@latest and the like) within AMICheckPeriod, where the class's
// full resolution, every ResyncPeriod, would take up to five minutes to
// drift the nodes onto it. Reading the parameters is cheap: one
// GetParameter call per name for all classes together (the classes of a
// cluster mostly share one alias), against a dozen EC2, SSM and IAM calls
// for each class's resolution. A class is re-resolved when a
// parameter it reads names an image its status.amis lacks, and only when
// that value is new (changed since the last check, or seen for the first
// time): a mismatch that resolution does not clear, such as an image
// DescribeImages does not show yet, is left to the resync rather than
// re-resolved every period.
//
// Pinned aliases (al2023@v20240807) are not read: their parameters never
// change. Nor are selector terms by id, name or tags, which have no
// parameter to watch; the resync covers them.
type AMIWatch struct {
	Client client.Reader
	SSM    amifamily.SSMAPI
	// KubernetesVersion is the cluster's "major.minor", which the alias
	// parameters are named for.
	KubernetesVersion func(ctx context.Context) (string, error)
	Clock             clock.WithTicker
	// Period defaults to AMICheckPeriod.
	Period time.Duration

	events chan event.GenericEvent
	// last is each parameter's value at the previous check.
	last map[string]string
}

// Check reads the parameters of the classes' @latest aliases and returns
// the classes to re-resolve, by name.
func (w *AMIWatch) Check(ctx context.Context) ([]string, error) {
	var classes awsv1.EC2NodeClassList
	if err := w.Client.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing EC2NodeClasses: %w", err)
	}
	version := ""
	byClass := map[string][]string{}
	wanted := map[string]bool{}
	for i := range classes.Items {
		nc := &classes.Items[i]
		alias, ok, err := amifamily.AliasOf(nc)
		if err != nil || !ok || alias.Version != amifamily.AliasVersionLatest || nc.DeletionTimestamp != nil {
			continue
		}
		if version == "" {
			if version, err = w.KubernetesVersion(ctx); err != nil {
				return nil, err
			}
		}
		names, err := amifamily.AliasParameters(alias, version)
		if err != nil {
			continue // the class's own resolution reports it
		}
		byClass[nc.Name] = names
		for _, n := range names {
			wanted[n] = true
		}
	}
	values, err := w.read(ctx, wanted)
	if err != nil {
		return nil, err
	}
	if w.last == nil {
		w.last = map[string]string{}
	}
	var out []string
	for i := range classes.Items {
		nc := &classes.Items[i]
		names, ok := byClass[nc.Name]
		if !ok {
			continue
		}
		listed := map[string]bool{}
		for _, ami := range nc.Status.AMIs {
			listed[ami.ID] = true
		}
		for _, n := range names {
			v, found := values[n]
			prev, seen := w.last[n]
			if found && !listed[v] && (!seen || prev != v) {
				log.FromContext(ctx).Info("re-resolving EC2NodeClass: an image parameter names an image its status lacks",
					"EC2NodeClass", map[string]string{"name": nc.Name}, "parameter", n, "image", v)
				out = append(out, nc.Name)
				break
			}
		}
	}
	for n := range wanted {
		if v, found := values[n]; found {
			w.last[n] = v
		} else {
			delete(w.last, n)
		}
	}
	return out, nil
}

// read returns the values of the parameters that exist (not every variant
// is published in every region or for every version).
func (w *AMIWatch) read(ctx context.Context, wanted map[string]bool) (map[string]string, error) {
	names := slices.Sorted(maps.Keys(wanted))
	values, err := amifamily.ReadParameters(ctx, w.SSM, names)
	if err != nil {
		return nil, fmt.Errorf("reading the image parameters of @latest aliases: %w", err)
	}
	return values, nil
}

// Start checks every Period until ctx ends, sending each class to
// re-resolve to the controller; a failed check is logged and the next one
// tries again.
func (w *AMIWatch) Start(ctx context.Context) error {
	period := w.Period
	if period <= 0 {
		period = AMICheckPeriod
	}
	ticker := w.Clock.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		names, err := w.Check(ctx)
		if err != nil {
			log.FromContext(ctx).Error(err, "checking the image parameters of @latest aliases")
			continue
		}
		for _, name := range names {
			nc := &awsv1.EC2NodeClass{}
			nc.Name = name
			select {
			case w.eventsChan() <- event.GenericEvent{Object: nc}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// NeedLeaderElection: only the leader resolves classes.
func (w *AMIWatch) NeedLeaderElection() bool { return true }

func (w *AMIWatch) eventsChan() chan event.GenericEvent {
	if w.events == nil {
		w.events = make(chan event.GenericEvent)
	}
	return w.events
}
