package requirements

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

func nsr(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// TestPredicates checks each operator as a pod's predicate against a node
// whose label has a value (Has, Allows) and against one without the label
// (Compatible), with Kubernetes' node-affinity semantics.
func TestPredicates(t *testing.T) {
	tests := []struct {
		op      corev1.NodeSelectorOperator
		values  []string
		value   string
		present bool
		want    bool
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, "a", true, true},
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, "c", true, false},
		{corev1.NodeSelectorOpIn, []string{"a"}, "", false, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, "a", true, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, "b", true, true},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, "", false, true},
		{corev1.NodeSelectorOpExists, nil, "x", true, true},
		{corev1.NodeSelectorOpExists, nil, "", false, false},
		{corev1.NodeSelectorOpDoesNotExist, nil, "x", true, false},
		{corev1.NodeSelectorOpDoesNotExist, nil, "", false, true},
		{corev1.NodeSelectorOpGt, []string{"4"}, "5", true, true},
		{corev1.NodeSelectorOpGt, []string{"4"}, "4", true, false},
		{corev1.NodeSelectorOpGt, []string{"4"}, "large", true, false},
		{corev1.NodeSelectorOpLt, []string{"4"}, "3", true, true},
		{corev1.NodeSelectorOpLt, []string{"4"}, "4", true, false},
		{v1.NodeSelectorOpGte, []string{"4"}, "4", true, true},
		{v1.NodeSelectorOpGte, []string{"4"}, "3", true, false},
		{v1.NodeSelectorOpLte, []string{"4"}, "4", true, true},
		{v1.NodeSelectorOpLte, []string{"4"}, "5", true, false},
		{v1.NodeSelectorOpLte, []string{"4"}, "", false, false},
	}
	for _, tt := range tests {
		rs, err := FromNodeSelectorRequirements(nsr("k", tt.op, tt.values...))
		if err != nil {
			t.Fatalf("%s %v: %v", tt.op, tt.values, err)
		}
		var got bool
		if tt.present {
			got = rs.Allows("k", tt.value)
			if has := rs["k"].Has(tt.value); has != got {
				t.Errorf("k %s %v: Has(%q) = %v but Allows = %v", tt.op, tt.values, tt.value, has, got)
			}
		} else {
			got = Requirements{}.Compatible(rs) == nil
		}
		if got != tt.want {
			t.Errorf("k %s %v on value %q (present %v) = %v, want %v", tt.op, tt.values, tt.value, tt.present, got, tt.want)
		}
	}
	for _, bad := range []v1.NodeSelectorRequirementWithMinValues{
		nsr("k", corev1.NodeSelectorOpGt, "x"),
		nsr("k", v1.NodeSelectorOpLte),
		nsr("k", "Near", "1"),
	} {
		if _, err := FromNodeSelectorRequirements(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestDeprecatedKeys checks that a requirement written with a beta label
// key constrains the label nodes carry.
func TestDeprecatedKeys(t *testing.T) {
	rs, err := FromNodeSelectorRequirements(nsr("failure-domain.beta.kubernetes.io/zone", corev1.NodeSelectorOpIn, "us-east-1a"))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Allows(corev1.LabelTopologyZone, "us-east-1b") || !rs.Allows(corev1.LabelTopologyZone, "us-east-1a") {
		t.Errorf("zone requirement under the beta key: %s", rs)
	}
}

// FuzzRoundTrip checks that a requirement written back as a node selector
// term (as NodeClaims carry them) and read again admits the same values:
// the planner writes NodeClaims' requirements this way and the cloud
// providers read them.
func FuzzRoundTrip(f *testing.F) {
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte}
	f.Add(uint8(0), "m5.large", "c6a.large", "m5.large")
	f.Add(uint8(1), "m5.large", "", "c6a.large")
	f.Add(uint8(4), "2", "", "3")
	f.Add(uint8(6), "08", "", "8")
	f.Add(uint8(7), "99999999999999999999", "", "1")
	f.Fuzz(func(t *testing.T, opIndex uint8, a, b, probe string) {
		op := ops[int(opIndex)%len(ops)]
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		if op == corev1.NodeSelectorOpExists || op == corev1.NodeSelectorOpDoesNotExist {
			values = nil
		}
		first, err := FromNodeSelectorRequirements(nsr("k", op, values...))
		if err != nil {
			return
		}
		again, err := FromNodeSelectorRequirements(first.NodeSelectorRequirements()...)
		if err != nil {
			t.Fatalf("%s %s %q written back as %v: %v", "k", op, values, first.NodeSelectorRequirements(), err)
		}
		if x, y := first.Allows("k", probe), again.Allows("k", probe); x != y {
			t.Fatalf("k %s %q admits %q: %v; written back as %v: %v", op, values, probe, x, first.NodeSelectorRequirements(), y)
		}
	})
}

// TestIntersectsMatchesIntersect: Intersects answers as
// !Intersect(o).Empty() for every pair drawn from each operator, a few
// value sets and their intersections, bounds included.
func TestIntersectsMatchesIntersect(t *testing.T) {
	var all []*Requirement
	for _, c := range []struct {
		op     corev1.NodeSelectorOperator
		values [][]string
	}{
		{corev1.NodeSelectorOpIn, [][]string{{"a"}, {"a", "b"}, {"c"}, {"3", "5", "8"}}},
		{corev1.NodeSelectorOpNotIn, [][]string{{"a"}, {"a", "b", "c"}, {"5"}}},
		{corev1.NodeSelectorOpExists, [][]string{nil}},
		{corev1.NodeSelectorOpDoesNotExist, [][]string{nil}},
		{corev1.NodeSelectorOpGt, [][]string{{"4"}, {"8"}}},
		{corev1.NodeSelectorOpLt, [][]string{{"4"}, {"9"}}},
	} {
		for _, vs := range c.values {
			rs, err := FromNodeSelectorRequirements(nsr("k", c.op, vs...))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, rs["k"])
		}
	}
	// And their intersections: finite sets that carry bounds.
	base := len(all)
	for _, a := range all[:base] {
		for _, b := range all[:base] {
			all = append(all, a.Intersect(b))
		}
	}
	for _, a := range all {
		for _, b := range all {
			if got, want := a.Intersects(b), !a.Intersect(b).Empty(); got != want {
				t.Errorf("(%s).Intersects(%s) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// TestLabelsCompatibleMatchesCompatible holds the shortcut for concrete
// labels to the requirements it stands for: same verdict, and for one
// key the same message.
func TestLabelsCompatibleMatchesCompatible(t *testing.T) {
	preds := []v1.NodeSelectorRequirementWithMinValues{
		nsr("k", corev1.NodeSelectorOpIn, "a", "b"),
		nsr("k", corev1.NodeSelectorOpNotIn, "a"),
		nsr("k", corev1.NodeSelectorOpExists),
		nsr("k", corev1.NodeSelectorOpDoesNotExist),
		nsr("k", corev1.NodeSelectorOpGt, "4"),
		nsr("k", v1.NodeSelectorOpLte, "4"),
		nsr("j", corev1.NodeSelectorOpIn, "x"),
		nsr("j", corev1.NodeSelectorOpNotIn, "x"),
	}
	labelSets := []map[string]string{
		nil,
		{"k": "a"},
		{"k": "c"},
		{"k": "5"},
		{"k": "4", "j": "x"},
		{"j": "y"},
	}
	for _, labels := range labelSets {
		for i := range preds {
			for j := i; j < len(preds); j++ {
				pod, err := FromNodeSelectorRequirements(preds[i], preds[j])
				if err != nil {
					t.Fatal(err)
				}
				got, want := LabelsCompatible(labels, pod), LabelRequirements(labels).Compatible(pod)
				// With two keys, which one fails first is map order.
				if (got == nil) != (want == nil) || (got != nil && len(pod) == 1 && got.Error() != want.Error()) {
					t.Errorf("labels %v, pod %s: LabelsCompatible %v, Compatible %v", labels, pod, got, want)
				}
			}
		}
	}
}

// An interned set must read as the set LabelRequirements builds, and share
// each requirement with the earlier sets that had its label.
func TestInternerSharesLabels(t *testing.T) {
	sets := []map[string]string{
		{"arch": "amd64", "family": "m5", "cpu": "4"},
		{"arch": "amd64", "family": "m5", "cpu": "8"},
		{"arch": "arm64", "family": "m6g"},
		nil,
	}
	var in Interner
	seen := map[[2]string]*Requirement{}
	for _, labels := range sets {
		got, want := in.LabelRequirements(labels), LabelRequirements(labels)
		if got.String() != want.String() || len(got) != len(labels) {
			t.Errorf("labels %v: interned %s, want %s", labels, got, want)
		}
		for k, v := range labels {
			r := got[k]
			if first, ok := seen[[2]string{k, v}]; ok && first != r {
				t.Errorf("label %s=%s: a second requirement, not the first's", k, v)
			}
			seen[[2]string{k, v}] = r
		}
	}
	if seen[[2]string{"cpu", "4"}] == seen[[2]string{"cpu", "8"}] {
		t.Error("cpu=4 and cpu=8 share a requirement")
	}
}
