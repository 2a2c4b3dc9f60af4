package simulate

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// TestKubeSchedulerSpreads: the simulated kube-scheduler binds a pending
// pod as the default profile does, to the emptier of two nodes it fits,
// not to the fuller one a packing planner would fill first.
func TestKubeSchedulerSpreads(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSim(Config{Name: "test", Objects: scenario{}.objects(t), InstanceTypes: its, Timing: DefaultTiming()})
	if err != nil {
		t.Fatal(err)
	}
	var typ = s.poolTypes["default"][0]
	for _, it := range s.poolTypes["default"] {
		if it.Name == "c6a.2xlarge" {
			typ = it
		}
	}
	var nodes []*simNode
	for _, name := range []string{"a", "b"} {
		n := &simNode{name: name, pool: "default", it: typ, offering: typ.Offerings[0], labels: map[string]string{"kubernetes.io/hostname": name},
			launched: s.now, readyAt: s.now, pods: map[string]*simPod{}}
		s.nodes[name] = n
		nodes = append(nodes, n)
	}
	web := s.owners[ownerKey(kindDeployment, "default", "web")]
	for range 3 {
		s.bind(s.newPod(web), nodes[0])
	}
	p := s.newPod(web)
	s.schedule()
	if p.node != nodes[1] {
		where := "no node"
		if p.node != nil {
			where = "node " + p.node.name
		}
		t.Fatalf("the pending pod went to %s; want the empty node b, where kube-scheduler's least-allocated scoring sends it", where)
	}
}
