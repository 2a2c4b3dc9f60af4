package requirements

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func TestRequirementAccepts(t *testing.T) {
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
		rs, err := Parse([]v1.NodeSelectorRequirementWithMinValues{req("k", tt.op, tt.values...)})
		if err != nil {
			t.Fatalf("%s %v: %v", tt.op, tt.values, err)
		}
		if got := rs["k"][0].accepts(tt.value, tt.present); got != tt.want {
			t.Errorf("k %s %v accepts(%q, present=%v) = %v, want %v", tt.op, tt.values, tt.value, tt.present, got, tt.want)
		}
	}
	for _, bad := range []v1.NodeSelectorRequirementWithMinValues{
		req("k", corev1.NodeSelectorOpGt, "x"),
		req("k", v1.NodeSelectorOpLte),
		req("k", "Near", "1"),
	} {
		if _, err := Parse([]v1.NodeSelectorRequirementWithMinValues{bad}); err == nil {
			t.Errorf("Parse(%v) accepted an invalid requirement", bad)
		}
	}
}
