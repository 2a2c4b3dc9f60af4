package manifests

import (
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// TestTheClassShapesThePoolsTypes: a NodePool's types are the catalog's as
// its EC2NodeClass's nodes report them, so a plan of 100 tiny pods on a
// class with kubelet maxPods 110 needs fewer nodes than on the default's
// ENI-limited pods; a class whose kubelet cannot be read leaves its pools
// out, saying why.
func TestTheClassShapesThePoolsTypes(t *testing.T) {
	const docs = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiSelectorTerms: [{alias: al2023@latest}], role: r KUBELET}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: tiny}
spec:
  replicas: 100
  selector: {matchLabels: {app: tiny}}
  template:
    metadata: {labels: {app: tiny}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 10m, memory: 16Mi}}}]
`
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, kubelet string
		pods          int64
		nodes         int
		problem       string
	}{
		{name: "the defaults", pods: 29, nodes: 4},
		{name: "maxPods 110", kubelet: ", kubelet: {maxPods: 110}", pods: 110, nodes: 1},
		{name: "a kubeReserved that is no quantity", kubelet: `, kubelet: {kubeReserved: {cpu: lots}}`, problem: `EC2NodeClass default: spec.kubelet.kubeReserved["cpu"]: "lots" is not a quantity`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := Parse("test", strings.NewReader(strings.Replace(docs, " KUBELET", c.kubelet, 1)))
			if err != nil {
				t.Fatal(err)
			}
			snap, problems := objs.Snapshot(its)
			if c.problem != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].Reason, c.problem) || len(snap.NodePools) != 0 {
					t.Fatalf("problems %+v and %d pools, want the pool left out with %q", problems, len(snap.NodePools), c.problem)
				}
				return
			}
			for _, it := range snap.NodePools[0].InstanceTypes {
				if it.Name == "m5.large" && it.Allocatable.Pods().Value() != c.pods {
					t.Errorf("m5.large takes %v pods, want %d", it.Allocatable.Pods(), c.pods)
				}
			}
			plan := scheduling.Solve(snap, scheduling.Options{})
			if len(plan.NewNodeClaims) != c.nodes || len(plan.Unschedulable) > 0 {
				t.Errorf("%d nodes (%d pods unplaced), want %d", len(plan.NewNodeClaims), len(plan.Unschedulable), c.nodes)
			}
		})
	}
}
