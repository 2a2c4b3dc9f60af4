package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// planManifests are issue 38's acceptance workload, offline: 30 pods that
// each need an m5.large, on a pool of spot and on-demand m5.large.
const planManifests = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 30
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.9, resources: {requests: {cpu: 1200m, memory: 4Gi}}}]
`

// joiner plan --commitments fills the RIs first and prices each NodeClaim
// on the bill: 8 on-demand NodeClaims cost nothing there, the plan's
// dollar covers others at 30% off, and -o json gives the plan's, the list
// and the effective price of each with their totals. Without the file,
// effective is list. A file with a mistake names the field and the fix.
func TestPlanWithCommitments(t *testing.T) {
	manifests := writeTemp(t, planManifests)
	commitments := writeTemp(t, `reservedInstances:
- {instanceType: m5.large, instanceCount: 8}
savingsPlans:
- {savingsPlanType: Compute, commitment: 1.00, discount: 0.3}
`)
	for _, tc := range []struct {
		name        string
		args        []string
		wantFree    int
		wantCheaper bool
		wantErr     string
	}{
		{name: "at list prices", args: []string{"plan", "-f", manifests, "-o", "json"}},
		{name: "with commitments", args: []string{"plan", "-f", manifests, "-o", "json", "--commitments", commitments}, wantFree: 8, wantCheaper: true},
		{name: "a field that is not one", args: []string{"plan", "-f", manifests, "--commitments", writeTemp(t, "reservedInstances: [{instanceType: m5.large, count: 8}]\n")},
			wantErr: `unknown field "count"`},
		{name: "a plan type that is not one", args: []string{"plan", "-f", manifests, "--commitments", writeTemp(t, "savingsPlans: [{savingsPlanType: Ec2, commitment: 1, discount: 0.3}]\n")},
			wantErr: `savingsPlans[0].savingsPlanType: "Ec2"; use Compute or EC2Instance`},
		{name: "an RI of no catalog type", args: []string{"plan", "-f", manifests, "--commitments", writeTemp(t, "reservedInstances: [{instanceType: m5.huge, instanceCount: 8}]\n")},
			wantErr: `reservedInstances[0].instanceType: "m5.huge" is not an instance type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := run(t, "", tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(stderr+err.Error(), tc.wantErr) {
					t.Fatalf("error %v (%s), want one with %q", err, stderr, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			var doc Document
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			free, list, effective, pods := 0, 0.0, 0.0, 0
			for _, nc := range doc.NodeClaims {
				if nc.EffectivePricePerHour == 0 && nc.CapacityType == "on-demand" {
					free++
				}
				if nc.EffectivePricePerHour > nc.ListPricePerHour+1e-9 {
					t.Errorf("%s %s costs $%v on the bill, over its list $%v", nc.InstanceType, nc.CapacityType, nc.EffectivePricePerHour, nc.ListPricePerHour)
				}
				list += nc.ListPricePerHour
				effective += nc.EffectivePricePerHour
				pods += nc.Pods
			}
			if pods != 30 || free != tc.wantFree {
				t.Fatalf("%d pods, %d NodeClaims free on the bill, want 30 and %d: %s", pods, free, tc.wantFree, out)
			}
			if math.Abs(list-doc.TotalListPricePerHour) > 1e-3 || math.Abs(effective-doc.TotalEffectivePricePerHour) > 1e-3 {
				t.Errorf("totals $%v list and $%v effective, the NodeClaims sum to $%v and $%v", doc.TotalListPricePerHour, doc.TotalEffectivePricePerHour, list, effective)
			}
			if cheaper := effective < list-1e-6; cheaper != tc.wantCheaper {
				t.Errorf("effective $%v against list $%v: cheaper %v, want %v", effective, list, cheaper, tc.wantCheaper)
			}
			t.Logf("%d NodeClaims: $%.4f/h list, $%.4f/h on the bill", len(doc.NodeClaims), list, effective)
		})
	}
}
