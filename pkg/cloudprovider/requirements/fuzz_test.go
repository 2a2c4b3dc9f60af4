package requirements_test

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/requirements"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// FuzzAgreesWithScheduling checks the cloud providers' requirement
// evaluator against the scheduling core's: for any requirement both accept,
// they must agree on every value, or the planner and the launch would
// disagree on which instance types a NodeClaim allows. (Issue 20 makes the
// scheduling algebra the only one; until then this keeps the two equal.)
func FuzzAgreesWithScheduling(f *testing.F) {
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte, "Bogus"}
	f.Add(uint8(0), "m5.large", "c6a.large", "m5.large")
	f.Add(uint8(1), "m5.large", "", "c6a.large")
	f.Add(uint8(4), "2", "", "3")
	f.Add(uint8(5), "-1", "", "-2")
	f.Add(uint8(6), "08", "", "8")
	f.Add(uint8(7), "99999999999999999999", "", "1")
	f.Add(uint8(2), "", "", "x")
	f.Fuzz(func(t *testing.T, opIndex uint8, a, b, probe string) {
		op := ops[int(opIndex)%len(ops)]
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		if op == corev1.NodeSelectorOpExists || op == corev1.NodeSelectorOpDoesNotExist {
			values = nil
		}
		in := v1.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-cpu", Operator: op, Values: values}
		theirs, errP := requirements.Parse([]v1.NodeSelectorRequirementWithMinValues{in})
		ours, errS := scheduling.FromNodeSelectorRequirements(in)
		if errP != nil || errS != nil {
			return // validation refuses what either refuses, before both
		}
		got, want := theirs.Allow(in.Key, probe), ours[in.Key].Has(probe)
		if got != want {
			t.Fatalf("%s %s %q: the cloud providers' evaluator allows %q: %t, the scheduling core's: %t", in.Key, op, values, probe, got, want)
		}
	})
}
