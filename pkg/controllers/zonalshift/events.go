// Package zonalshift tells each NodePool when an ARC zonal shift takes a
// zone it could launch into away, and when the zone comes back, with
// Karpenter's events (ZonalShiftActive, ZonalShiftCleared).
package zonalshift

import (
	"context"
	"fmt"
	"sort"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// LabelZoneID is the well-known label of a node's zone ID.
const LabelZoneID = "topology.k8s.aws/zone-id"

// Events publishes the events of a change in the shifted zone IDs.
type Events struct {
	Client   client.Reader
	Recorder record.EventRecorder
}

// Changed is the zonal shift provider's OnChange.
func (e *Events) Changed(ctx context.Context, before, after map[string]bool) {
	var shifted, cleared []string
	for id := range after {
		if !before[id] {
			shifted = append(shifted, id)
		}
	}
	for id := range before {
		if !after[id] {
			cleared = append(cleared, id)
		}
	}
	sort.Strings(shifted)
	sort.Strings(cleared)
	var pools v1.NodePoolList
	if err := e.Client.List(ctx, &pools); err != nil {
		log.FromContext(ctx).Error(err, "listing nodepools for zonal shift events")
		return
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		zones := e.zonesOf(ctx, np)
		for _, id := range shifted {
			if zone, ok := zones[id]; ok {
				e.Recorder.Event(np, corev1.EventTypeWarning, "ZonalShiftActive",
					fmt.Sprintf("Zonal shift detected: offerings in zone %s (%s) are unavailable for this NodePool", zone, id))
			}
		}
		for _, id := range cleared {
			if zone, ok := zones[id]; ok {
				e.Recorder.Event(np, corev1.EventTypeNormal, "ZonalShiftCleared",
					fmt.Sprintf("Zonal shift cleared: offerings in zone %s (%s) are restored for this NodePool", zone, id))
			}
		}
	}
}

// zonesOf maps the zone IDs the pool may launch into (its class's subnets,
// narrowed by its zone and zone-ID requirements) to their zone names.
func (e *Events) zonesOf(ctx context.Context, np *v1.NodePool) map[string]string {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group {
		return nil
	}
	var nc awsv1.EC2NodeClass
	if err := e.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, &nc); err != nil {
		return nil
	}
	reqs, err := requirements.FromNodeSelectorRequirements(np.Spec.Template.Spec.Requirements...)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, s := range nc.Status.Subnets {
		if s.ZoneID != "" && reqs.Allows(corev1.LabelTopologyZone, s.Zone) && reqs.Allows(LabelZoneID, s.ZoneID) {
			out[s.ZoneID] = s.Zone
		}
	}
	return out
}
