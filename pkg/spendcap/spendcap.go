// Package spendcap is a NodePool's cap on what its nodes cost an hour.
//
// Karpenter's NodePool schema has no field for money, and Joiner keeps that
// schema unchanged so that Karpenter's manifests and tools read it as they
// always have. The cap is an annotation instead:
//
//	metadata:
//	  annotations:
//	    joiner.sh/hourly-spend-cap: "2.00"   # US dollars per hour
//
// The planner enforces it like spec.limits: it is one more limit of the
// pool, in micro-dollars, that every node counts against (Resource). A node
// counts its effective price once launched (what the bill charges under
// the account's commitments) and, before, the dearest offering the pool
// lets it land on, so that a launch that falls back from spot to on-demand
// still stays under the cap.
package spendcap

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

// Annotation holds a NodePool's cap in US dollars per hour.
const Annotation = "joiner.sh/hourly-spend-cap"

// Resource is the cap as one of the pool's limits, in micro-dollars per
// hour: the planner's limit checks then hold it with no code of their own.
const Resource corev1.ResourceName = "joiner.sh/hourly-spend"

// Of returns the NodePool's cap in $/h and whether it has one; err says
// what is wrong with the annotation and how to fix it.
func Of(np *v1.NodePool) (float64, bool, error) {
	raw, ok := np.Annotations[Annotation]
	if !ok {
		return 0, false, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(raw), "$")), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false, fmt.Errorf("metadata.annotations[%s]: %q is not a cost in US dollars per hour; set a number of at least 0 such as \"2.50\", or remove the annotation", Annotation, raw)
	}
	return v, true, nil
}

// Micro is dollars as whole micro-dollars, rounded up: a cap is never
// exceeded by rounding.
func Micro(dollars float64) int64 {
	return int64(math.Ceil(dollars*1e6 - 1e-6))
}

// Limit is the cap as a limit quantity (Resource's units).
func Limit(dollars float64) resource.Quantity {
	return *resource.NewQuantity(int64(math.Floor(dollars*1e6+1e-6)), resource.DecimalSI)
}

// Dollars is micro-dollars as dollars.
func Dollars(micro int64) float64 { return float64(micro) / 1e6 }
