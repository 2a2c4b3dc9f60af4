package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
)

// tinyOnM5Large is 100 pods of 10m and 16Mi on a NodePool of m5.large
// alone, whose EC2NodeClass is KUBELET-less until replaced.
const tinyOnM5Large = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
---
CLASS
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

const classOf = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiSelectorTerms: [{alias: al2023@latest}], role: r, subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}] KUBELET}`

// TestTheClassShapesTheNodes: a run's nodes hold what their EC2NodeClass
// lets the kubelet run, from the start and after the class is applied
// again: with maxPods 110, an m5.large takes 100 tiny pods that need four
// of them at the VPC CNI's 29.
func TestTheClassShapesTheNodes(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	class := func(kubelet string) string { return strings.Replace(classOf, " KUBELET", kubelet, 1) }
	maxPods := ", kubelet: {maxPods: 110}"
	cases := []struct {
		name        string
		start, then string
		want        int
	}{
		{name: "the defaults", want: 4},
		{name: "maxPods 110 from the start", start: maxPods, want: 1},
		{name: "maxPods 110 applied at 30 minutes", then: maxPods, want: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := manifests.Parse("test", strings.NewReader(strings.Replace(tinyOnM5Large, "CLASS", class(c.start), 1)))
			if err != nil {
				t.Fatal(err)
			}
			tr := &Trace{Duration: d(2 * time.Hour)}
			if c.then != "" {
				tr.Events = append(tr.Events, Event{At: d(30 * time.Minute), Apply: class(c.then)})
			}
			res, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming()}, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			if last := res.Samples[len(res.Samples)-1]; last.Nodes != c.want || last.Pending != 0 {
				t.Errorf("%d nodes and %d pods pending at the end, want %d nodes: %+v", last.Nodes, last.Pending, c.want, res.Summary)
			}
			if c.then != "" && res.Summary.Disruptions["drifted"] == 0 {
				t.Errorf("the class's change drifted nothing: %+v", res.Summary)
			}
		})
	}
	bad := &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Apply: class(", kubelet: {kubeReserved: {cpu: lots}}")}}}
	objs, _ := manifests.Parse("test", strings.NewReader(strings.Replace(tinyOnM5Large, "CLASS", class(""), 1)))
	if _, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming()}, bad, nil); err == nil ||
		!strings.Contains(err.Error(), `events[0] (at 1m0s).apply: EC2NodeClass default: spec.kubelet.kubeReserved["cpu"]: "lots" is not a quantity`) {
		t.Errorf("a class applied with a kubeReserved that is no quantity: error %v", err)
	}
}
