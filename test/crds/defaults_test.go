package crds

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestDefaults(t *testing.T) {
	ctx := context.Background()
	client := dyn(t)
	cases := []struct {
		name string
		base string
		path []string
		want any
	}{
		{"NodePool expireAfter", baseNodePool, []string{"spec", "template", "spec", "expireAfter"}, "720h"},
		{"NodePool budgets", baseNodePool, []string{"spec", "disruption", "budgets"}, []any{map[string]any{"nodes": "10%"}}},
		{"NodePool consolidationPolicy", baseNodePool, []string{"spec", "disruption", "consolidationPolicy"}, "WhenEmptyOrUnderutilized"},
		{"NodePool consolidateAfter", baseNodePool, []string{"spec", "disruption", "consolidateAfter"}, "0s"},
		{"CapacityBuffer provisioningStrategy", baseCapacityBuffer, []string{"spec", "provisioningStrategy"}, "buffer.x-k8s.io/active-capacity"},
		{"NodeClaim expireAfter", baseNodeClaim, []string{"spec", "expireAfter"}, "720h"},
		{"EC2NodeClass metadataOptions", baseEC2NodeClass, []string{"spec", "metadataOptions"}, map[string]any{
			"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(1), "httpTokens": "required",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, tc.base)
			o.SetName("defaults")
			res := resourceFor(client, o.GetKind())
			created, err := res.Create(ctx, o, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}) })
			got, found, err := unstructured.NestedFieldNoCopy(created.Object, tc.path...)
			if err != nil || !found {
				t.Fatalf("%v not set (err %v)", tc.path, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%v = %#v, want %#v", tc.path, got, tc.want)
			}
		})
	}
}

// TestPartialDefaults checks the defaults that apply inside objects the user
// wrote only in part, as in guide 02's metadataOptions and a budget with no nodes.
func TestPartialDefaults(t *testing.T) {
	ctx := context.Background()
	client := dyn(t)
	cases := []struct {
		name, base, patch string
		path              []string
		want              any
	}{
		{"partial metadataOptions", baseEC2NodeClass, `spec: {metadataOptions: {httpTokens: optional}}`, []string{"spec", "metadataOptions"}, map[string]any{
			"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": int64(1), "httpTokens": "optional",
		}},
		{"budget without nodes", baseNodePool, `spec: {disruption: {consolidateAfter: 1m, budgets: [{reasons: [Drifted]}]}}`, []string{"spec", "disruption", "budgets"}, []any{
			map[string]any{"nodes": "10%", "reasons": []any{"Drifted"}},
		}},
		{"disruption without consolidateAfter keeps the user's policy", baseNodePool, `spec: {disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}}`, []string{"spec", "disruption", "consolidationPolicy"}, "WhenEmpty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := patched(t, tc.base, tc.patch)
			o.SetName("partial-defaults")
			res := resourceFor(client, o.GetKind())
			created, err := res.Create(ctx, o, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}) })
			got, _, _ := unstructured.NestedFieldNoCopy(created.Object, tc.path...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%v = %#v, want %#v", tc.path, got, tc.want)
			}
		})
	}
}
