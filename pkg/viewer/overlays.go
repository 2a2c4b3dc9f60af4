package viewer

import (
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"k8s.io/apimachinery/pkg/api/meta"
)

// overlays are the NodeOverlays the controller applies: those whose Ready
// condition it set True. The viewer takes the controller's verdict rather
// than judging conflicts again, so it prices what the controller planned
// with; with the NodeOverlay gate off no overlay has a status, and none
// applies, as in the controller.
type overlays struct {
	applied []*overlay.Overlay
	pools   map[string]overlay.Pool
}

func appliedOverlays(in Input) overlays {
	out := overlays{pools: map[string]overlay.Pool{}}
	for i := range in.NodePools {
		out.pools[in.NodePools[i].Name] = overlay.PoolOf(&in.NodePools[i])
	}
	for i := range in.NodeOverlays {
		no := &in.NodeOverlays[i]
		if !meta.IsStatusConditionTrue(no.Status.Conditions, "Ready") {
			continue
		}
		if o, err := overlay.Compile(no); err == nil {
			out.applied = append(out.applied, o)
		}
	}
	overlay.Sort(out.applied)
	return out
}

// price is a node's price under the overlays that select it.
func (o overlays) price(n *Node, price float64) float64 {
	if len(o.applied) == 0 {
		return price
	}
	pool, ok := o.pools[n.NodePool]
	if !ok {
		pool = overlay.Pool{Name: n.NodePool}
	}
	it := &cloudprovider.InstanceType{Name: n.InstanceType, Labels: n.Labels,
		Offerings: []cloudprovider.Offering{{Zone: n.Zone, CapacityType: n.CapacityType, Price: price}}}
	return overlay.Apply(pool, []*cloudprovider.InstanceType{it}, o.applied)[0].Offerings[0].Price
}

// types are a pool's types for the LP bound, overlaid as its nodes are.
func (o overlays) types(np *v1.NodePool, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
	return overlay.Apply(overlay.PoolOf(np), its, o.applied)
}

// note says the overlays priced the nodes, for the footer.
func (o overlays) note() string {
	if len(o.applied) == 0 {
		return ""
	}
	return fmt.Sprintf("%d NodeOverlay(s) applied", len(o.applied))
}
