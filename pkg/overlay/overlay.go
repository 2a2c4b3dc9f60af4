// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to instance
// types: a price or price adjustment on the offerings an overlay selects,
// and resources added to the types' capacity. It is pure, so the
// controller, `joiner plan` and the viewer price a node the same way.
//
// Which overlay wins where several select the same offering follows
// Karpenter v1.14.1: the higher weight (unset is 0), then, at equal
// weight, the name later in the alphabet. An overlay that sets what an
// overlay of the same weight ahead of it already set (a price of an
// offering, or the same capacity resource of a type) conflicts: it is
// applied nowhere, and its status says so.
package overlay

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/requirements"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Overlay is a NodeOverlay made ready to match and apply.
type Overlay struct {
	Name   string
	Weight int32
	reqs   requirements.Requirements
	// price turns an offering's price into the overlay's; nil leaves it.
	price func(float64) float64
	// Capacity is added to the selected types' capacity and allocatable.
	Capacity corev1.ResourceList
}

// SetsPrice says whether the overlay changes prices.
func (o *Overlay) SetsPrice() bool { return o.price != nil }

// restricted are resources an overlay may not add: the scheduler's own,
// which come from the catalog, and those the AWS provider computes for each
// type (Karpenter's WellKnownResources with the AWS provider's additions).
var restricted = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods,
	"vpc.amazonaws.com/pod-eni", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "habana.ai/gaudi", "vpc.amazonaws.com/efa",
}

// Compile checks what the CRD cannot and prepares the overlay. Its errors
// are the overlay's ValidationSucceeded=False message.
func Compile(no *v1alpha1.NodeOverlay) (*Overlay, error) {
	o := &Overlay{Name: no.Name, reqs: requirements.Requirements{}, Capacity: no.Spec.Capacity}
	if no.Spec.Weight != nil {
		o.Weight = *no.Spec.Weight
	}
	var errs []error
	for i, r := range no.Spec.Requirements {
		for j, v := range r.Values {
			if bad := validation.IsValidLabelValue(v); len(bad) > 0 && !isBound(r.Operator) {
				errs = append(errs, fmt.Errorf("spec.requirements[%d].values[%d]: %q is not a label value: %s", i, j, v, strings.Join(bad, "; ")))
			}
		}
		if r.Operator == corev1.NodeSelectorOpNotIn && len(r.Values) == 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a value defined", r.Key, r.Operator))
			continue
		}
		req, err := requirements.NewRequirement(requirements.NormalizeKey(r.Key), r.Operator, r.Values...)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.requirements[%d]: %w", i, err))
			continue
		}
		o.reqs.Add(req)
	}
	for name := range no.Spec.Capacity {
		if slices.Contains(restricted, name) {
			errs = append(errs, fmt.Errorf("invalid capacity: %s in resource, restricted", name))
		}
	}
	switch {
	case no.Spec.Price != nil:
		p, err := strconv.ParseFloat(*no.Spec.Price, 64)
		if err != nil || p < 0 || math.IsInf(p, 0) {
			errs = append(errs, fmt.Errorf("spec.price %q is not a price in dollars an hour", *no.Spec.Price))
		}
		o.price = func(float64) float64 { return p }
	case no.Spec.PriceAdjustment != nil:
		f, err := adjustment(*no.Spec.PriceAdjustment)
		if err != nil {
			errs = append(errs, err)
		}
		o.price = f
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

func isBound(op corev1.NodeSelectorOperator) bool {
	switch op {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, "Gte", "Lte":
		return true
	}
	return false
}

// adjustment parses a signed change in dollars ("-0.5") or percent
// ("+10%", "-25%"). The result never goes below zero: an offering cannot
// pay to be used.
func adjustment(s string) (func(float64) float64, error) {
	pct := strings.HasSuffix(s, "%")
	n, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || math.IsInf(n, 0) || (s[0] != '+' && s[0] != '-') {
		return nil, fmt.Errorf("spec.priceAdjustment %q is neither a signed amount such as -0.05 nor a signed percentage such as +10%%", s)
	}
	if pct {
		return func(base float64) float64 { return math.Max(0, base*(1+n/100)) }, nil
	}
	return func(base float64) float64 { return math.Max(0, base+n) }, nil
}

// Price is what the overlay makes of a price.
func (o *Overlay) Price(base float64) float64 { return o.price(base) }

// quantityOf reads a resource of a list, zero when absent.
func quantityOf(rl corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := rl[name]; ok {
		return q
	}
	return resource.Quantity{}
}

// addCapacity sets a resource's capacity and allocatable on a type whose
// lists the caller owns. Hugepages are carved out of memory, as the
// kubelet does, so pods cannot count the same bytes twice.
func addCapacity(it *cloudprovider.InstanceType, name corev1.ResourceName, q resource.Quantity) {
	old := quantityOf(it.Capacity, name)
	it.Capacity[name] = q
	it.Allocatable[name] = q
	if !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
		return
	}
	mem := quantityOf(it.Allocatable, corev1.ResourceMemory)
	mem.Add(old)
	mem.Sub(q)
	if mem.Sign() < 0 {
		mem = resource.Quantity{}
	}
	it.Allocatable[corev1.ResourceMemory] = mem
}
