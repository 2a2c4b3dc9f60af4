package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
)

const poolAndClass = `apiVersion: karpenter.sh/v1
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
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
---
`

// TestPlanVolumes: plan reads storage from the manifests, and StatefulSets'
// claims come from their templates.
func TestPlanVolumes(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		zones string // the zone of every NodeClaim; "" for several
		pods  int
	}{
		{name: "a StatefulSet's claims follow their StorageClass's allowedTopologies", pods: 3, zones: "us-east-1b", yaml: `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gp3
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.ebs.csi.aws.com/zone, values: [us-east-1b]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
`},
		{name: "a claim bound to a PV in the manifests follows the PV", pods: 1, zones: "us-east-1c", yaml: `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c]}]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {volumeName: pv-1, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`},
		{name: "a claim the manifests do not hold constrains nothing", pods: 1, yaml: `apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: elsewhere}}]
`},
	}
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(path, []byte(poolAndClass+tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := LoadFiles([]string{path})
			if err != nil {
				t.Fatal(err)
			}
			snap, problems := objs.Snapshot(its)
			if len(problems) > 0 {
				t.Fatalf("problems %v", problems)
			}
			plan := scheduling.Solve(snap, scheduling.Options{})
			placed := 0
			for _, nc := range plan.NewNodeClaims {
				placed += len(nc.Pods)
				zones := strings.Join(nc.Requirements[corev1.LabelTopologyZone].Values(), ",")
				if tc.zones != "" && zones != tc.zones {
					t.Errorf("nodeclaim in %s, want %s", zones, tc.zones)
				}
				if tc.zones == "" && !strings.Contains(zones, ",") {
					t.Errorf("nodeclaim pinned to %s", zones)
				}
			}
			if placed != tc.pods || len(plan.Unschedulable) > 0 {
				t.Fatalf("placed %d pods, want %d; unschedulable %+v", placed, tc.pods, plan.Unschedulable)
			}
		})
	}
}
