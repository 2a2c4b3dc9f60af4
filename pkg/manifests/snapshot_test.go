package manifests

import (
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

// TestNamespacesReachTheSnapshot: a pod affinity term's namespaceSelector
// matches Namespace objects by their labels, so the plan needs them.
func TestNamespacesReachTheSnapshot(t *testing.T) {
	const docs = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiSelectorTerms: [{alias: al2023@latest}], role: r}
---
apiVersion: v1
kind: Namespace
metadata: {name: data, labels: {team: data}}
---
apiVersion: v1
kind: Node
metadata:
  name: db-node
  labels: {kubernetes.io/hostname: db-node, topology.kubernetes.io/zone: us-east-1b}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: data, labels: {app: db}}
spec:
  nodeName: db-node
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: topology.kubernetes.io/zone
            labelSelector: {matchLabels: {app: db}}
            namespaceSelector: {matchLabels: {team: data}}
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
`
	o := &Objects{}
	if err := o.load("test.yaml", strings.NewReader(docs)); err != nil {
		t.Fatal(err)
	}
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap, problems := o.Snapshot(its)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if got := snap.Namespaces["data"]["team"]; got != "data" {
		t.Fatalf("namespace labels %v", snap.Namespaces)
	}
	plan := scheduling.Solve(snap, scheduling.Options{})
	if len(plan.Unschedulable) > 0 || len(plan.NewNodeClaims) == 0 {
		t.Fatalf("want the web pods placed: %+v", plan.Unschedulable)
	}
	for _, nc := range plan.NewNodeClaims {
		if z := nc.Requirements[corev1.LabelTopologyZone].Values(); len(z) != 1 || z[0] != "us-east-1b" {
			t.Fatalf("web pods in zones %v, want the db pod's us-east-1b", z)
		}
	}
}
