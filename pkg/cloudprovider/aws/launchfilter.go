package aws

import (
	"strconv"
	"strings"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
)

// withoutExotic leaves out GPU, accelerator and bare-metal types when any
// other type fits the NodeClaim, as Karpenter's AWS provider does. EC2
// chooses among a fleet's types by price and capacity alone, so a pod that
// fits an m5.large could otherwise land on a g5.xlarge whenever that is,
// for a moment, the cheaper spot offering, and hold a GPU nobody asked for.
// A NodeClaim that needs such types has nothing else that fits; one with
// minValues needs every type it can get to keep its breadth.
func withoutExotic(its []*cloudprovider.InstanceType, claim *v1.NodeClaim) []*cloudprovider.InstanceType {
	for _, r := range claim.Spec.Requirements {
		if r.MinValues != nil {
			return its
		}
	}
	out := make([]*cloudprovider.InstanceType, 0, len(its))
	for _, it := range its {
		if !exotic(it) {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return its
	}
	return out
}

// exotic reports a type with GPUs or accelerators, or a bare-metal one.
func exotic(it *cloudprovider.InstanceType) bool {
	for _, key := range []string{instancetype.LabelInstanceGPUCount, instancetype.LabelInstanceAcceleratorCount} {
		if n, err := strconv.Atoi(it.Labels[key]); err == nil && n > 0 {
			return true
		}
	}
	return strings.Contains(it.Labels[instancetype.LabelInstanceSize], "metal")
}

// withoutDearSpot leaves out, for a spot launch of a NodeClaim that also
// allows on-demand, each spot offering that costs more than the cheapest
// on-demand offering that would do (on-demand would then be cheaper and is
// not interrupted), and the types left with no spot offering, as
// Karpenter's launch filter does. A NodeClaim with minValues keeps them
// all: dropping types could leave fewer than it asks for. Without an
// on-demand offering to compare with, nothing is left out. The types kept
// whole are the shared ones; the others are copies.
func withoutDearSpot(its []*cloudprovider.InstanceType, reqs requirements.Requirements) []*cloudprovider.InstanceType {
	if !reqs.Allows(v1.LabelCapacityType, instance.CapacityTypeOnDemand) {
		return its
	}
	for _, r := range reqs {
		if r.MinValues != nil {
			return its
		}
	}
	allowed := func(ct string) func(cloudprovider.Offering) bool {
		return func(o cloudprovider.Offering) bool {
			return o.CapacityType == ct && reqs.Allows(corev1.LabelTopologyZone, o.Zone)
		}
	}
	cheapestOD, found := 0.0, false
	for _, it := range its {
		if o, ok := it.CheapestOffering(allowed(instance.CapacityTypeOnDemand)); ok && (!found || o.Price < cheapestOD) {
			cheapestOD, found = o.Price, true
		}
	}
	if !found {
		return its
	}
	out := make([]*cloudprovider.InstanceType, 0, len(its))
	for _, it := range its {
		kept, dropped := 0, 0
		for _, o := range it.Offerings {
			switch {
			case o.CapacityType != instance.CapacityTypeSpot:
			case o.Price <= cheapestOD:
				kept++
			default:
				dropped++
			}
		}
		switch {
		case kept == 0:
		case dropped == 0:
			out = append(out, it)
		default:
			cp := it.Copy()
			cp.Offerings = nil
			for _, o := range it.Offerings {
				if o.CapacityType != instance.CapacityTypeSpot || o.Price <= cheapestOD {
					cp.Offerings = append(cp.Offerings, o)
				}
			}
			out = append(out, cp)
		}
	}
	return out
}
