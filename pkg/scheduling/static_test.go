package scheduling

import (
	"strings"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

// A static pool's node is the pool's cheapest that its DaemonSets fit on,
// with the pool's requirements and taints, and no pods.
func TestStaticNodeClaim(t *testing.T) {
	tainted := onDemandPool("static")
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "static", Effect: corev1.TaintEffectNoExecute}}
	pinned := onDemandPool("pinned", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c6a.4xlarge", "c6g.4xlarge"))
	cases := []struct {
		name    string
		pool    *v1.NodePool
		daemons []*corev1.Pod
		check   func(t *testing.T, nc *NewNodeClaim)
		wantErr string
	}{
		{name: "the cheapest type", pool: onDemandPool("static"), check: func(t *testing.T, nc *NewNodeClaim) {
			if nc.InstanceType.Name != "c6a.large" && !strings.HasSuffix(nc.InstanceType.Name, ".medium") && !strings.HasSuffix(nc.InstanceType.Name, ".large") {
				t.Errorf("%s, want one of the smallest types", nc.InstanceType.Name)
			}
		}},
		{name: "a pinned type", pool: pinned, check: func(t *testing.T, nc *NewNodeClaim) {
			if nc.InstanceType.Name != "c6a.4xlarge" {
				t.Errorf("%s, want c6a.4xlarge (the amd64 pool's only pinned type)", nc.InstanceType.Name)
			}
		}},
		{name: "a taint no pod tolerates", pool: tainted, check: func(t *testing.T, nc *NewNodeClaim) {
			if len(nc.Pods) != 0 || nc.NodePool != "static" {
				t.Errorf("pods %d, pool %s", len(nc.Pods), nc.NodePool)
			}
		}},
		{name: "room for the DaemonSets", pool: onDemandPool("static"), daemons: []*corev1.Pod{daemonSetPod("agent", "3", "1Gi")}, check: func(t *testing.T, nc *NewNodeClaim) {
			if nc.Requests.CPU != 3000 {
				t.Errorf("requests %dm cpu, want the agent's 3000m", nc.Requests.CPU)
			}
		}},
		{name: "no type", pool: onDemandPool("static", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "no.such")), wantErr: "no instance type satisfies the NodePool's requirements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := StaticNodeClaim(NodePool{NodePool: tc.pool, InstanceTypes: testCatalog(t)}, tc.daemons, Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(nc.InstanceTypes) == 0 || !nc.Requirements.Allows(v1.LabelNodePool, tc.pool.Name) {
				t.Fatalf("options %d, requirements %s", len(nc.InstanceTypes), nc.Requirements)
			}
			tc.check(t, nc)
		})
	}
}
