package manifests

import (
	"strings"
	"testing"
)

// TestCRDDefaults: a NodePool read offline means what it would once
// applied; without the CRD's defaults an omitted consolidateAfter decodes
// as Never.
func TestCRDDefaults(t *testing.T) {
	cases := []struct {
		name, disruption string
		after            string
		policy           string
		budgets          int
		err              string
	}{
		{"omitted", "", "0s", "WhenEmptyOrUnderutilized", 1, ""},
		{"Never kept", "  disruption: {consolidateAfter: Never}\n", "Never", "WhenEmptyOrUnderutilized", 1, ""},
		{"set kept", "  disruption: {consolidateAfter: 5m, consolidationPolicy: WhenEmpty, budgets: [{nodes: '1'}, {nodes: '0', reasons: [Drifted]}]}\n", "5m", "WhenEmpty", 2, ""},
		{"required consolidateAfter missing", "  disruption: {consolidationPolicy: WhenEmpty}\n", "", "", 0, "spec.disruption.consolidateAfter: Required value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n" + c.disruption +
				"  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n"
			objs, err := Parse("test", strings.NewReader(doc))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := objs.NodePools[0].Spec.Disruption
			if got := d.ConsolidateAfter.String(); got != c.after {
				t.Errorf("consolidateAfter %q, want %q", got, c.after)
			}
			if string(d.ConsolidationPolicy) != c.policy || len(d.Budgets) != c.budgets {
				t.Errorf("policy %q budgets %v, want %q and %d", d.ConsolidationPolicy, d.Budgets, c.policy, c.budgets)
			}
			if got := objs.NodePools[0].Spec.Template.Spec.ExpireAfter.String(); got != "720h" {
				t.Errorf("expireAfter %q, want the CRD's 720h", got)
			}
		})
	}
}
