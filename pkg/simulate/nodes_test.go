package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// node is a Node of the scenario's pool; its labels are replaced.
const startNode = `---
apiVersion: v1
kind: Node
metadata:
  name: NAME
  labels: {karpenter.sh/nodepool: POOL, node.kubernetes.io/instance-type: TYPE, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand}
`

func nodeDoc(name, pool, typ string) string {
	return strings.NewReplacer("NAME", name, "POOL", pool, "TYPE", typ).Replace(startNode)
}

// TestStartFromNodes: a run starts from the manifests' Nodes: the pods
// go onto them with no launch while they have room, and consolidation
// treats them as it treats its own; a Node no NodePool of -f manages, or
// of a type or offering the catalog lacks, is refused by name.
func TestStartFromNodes(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steady := &Trace{Duration: d(time.Hour), Events: []Event{{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 6}}}}
	cases := []struct {
		name, nodes string
		check       func(t *testing.T, r *Result)
		err         string
	}{
		{name: "room for every pod", nodes: nodeDoc("old-0", "default", "c6a.4xlarge"), check: func(t *testing.T, r *Result) {
			if r.Summary.Plans != 0 || r.Summary.PendingSecondsMax != 0 {
				t.Errorf("%d plans and pods waiting %gs with room for them from the start", r.Summary.Plans, r.Summary.PendingSecondsMax)
			}
		}},
		{name: "room for some", nodes: nodeDoc("old-0", "default", "c6a.large"), check: func(t *testing.T, r *Result) {
			if r.Summary.Plans == 0 || r.Summary.NodesLaunched == 0 {
				t.Errorf("no plan for the pods the node has no room for: %+v", r.Summary)
			}
		}},
		{name: "two of them become one", nodes: nodeDoc("old-0", "default", "c6a.4xlarge") + nodeDoc("old-1", "default", "c6a.4xlarge"), check: func(t *testing.T, r *Result) {
			if last := r.Samples[len(r.Samples)-1]; r.Summary.Disruptions["empty"]+r.Summary.Disruptions["underutilized"] == 0 || last.Nodes != 1 {
				t.Errorf("%d nodes at the end: %+v", last.Nodes, r.Summary)
			}
		}},
		{name: "a type the NodePool does not admit drifts", nodes: nodeDoc("old-0", "default", "t3.xlarge"), check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["drifted"] != 1 {
				t.Errorf("the t3 node did not drift: %+v", r.Summary)
			}
		}},
		{name: "a node named as the run names its own", nodes: nodeDoc("default-00001", "default", "c6a.large"), check: func(t *testing.T, r *Result) {
			// The c6a.large holds one pod, the node launched for the five
			// others all six, and it goes: unless the launch took its
			// name, and the run lost it.
			for _, dec := range r.Decisions {
				if strings.Join(dec.Nodes, " ") == "default-00001 (c6a.large, on-demand)" {
					return
				}
			}
			t.Errorf("the c6a.large default-00001 was never consolidated: %+v %+v", r.Decisions, r.Summary)
		}},
		{name: "a node given twice", nodes: nodeDoc("old-0", "default", "c6a.large") + nodeDoc("old-0", "default", "c6a.large"), err: "Node old-0 is given twice"},
		{name: "no NodePool", nodes: nodeDoc("old-0", "other", "c6a.large"), err: `Node old-0: label karpenter.sh/nodepool is "other", not a NodePool of the manifests`},
		{name: "no such type", nodes: nodeDoc("old-0", "default", "x9.huge"), err: `Node old-0: label node.kubernetes.io/instance-type is "x9.huge", not an instance type of the catalog's region`},
		{name: "no such zone", nodes: strings.Replace(nodeDoc("old-0", "default", "c6a.large"), "us-east-1a", "eu-west-1a", 1),
			err: `Node old-0: labels topology.kubernetes.io/zone "eu-west-1a" and karpenter.sh/capacity-type "on-demand" name no offering of c6a.large`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(Config{Name: "test", Objects: scenario{extra: c.nodes}.objects(t), InstanceTypes: its, Timing: DefaultTiming()}, steady, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Summary.TotalCost <= 0 || res.Summary.TotalCost < res.Summary.LPBoundCost {
				t.Errorf("cost $%.4f, bound $%.4f", res.Summary.TotalCost, res.Summary.LPBoundCost)
			}
			c.check(t, res)
		})
	}
}

// TestPodsSpreadFromSiblings: kube-scheduler's default spreading sends
// one of a Deployment's four pods to the small node beside the big one,
// where least allocated alone puts all four on the big one; the others
// stay there, where the room outweighs the spread.
func TestPodsSpreadFromSiblings(t *testing.T) {
	nodes := nodeDoc("a-big", "default", "c6a.16xlarge") + nodeDoc("b-small", "default", "c6a.xlarge")
	s := prepare(t, scenario{policy: "WhenEmpty", extra: nodes}, &Trace{Duration: d(time.Hour), Events: []Event{{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 4}}}})
	onSmall := -1
	s.at(s.start.Add(time.Minute), func() { onSmall = len(s.nodes["b-small"].pods) })
	s.play(&Trace{Duration: d(time.Hour), Events: []Event{{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 4}}}}, nil)
	if onSmall != 1 {
		t.Errorf("%d of web's 4 pods on the small node; want 1, spread from their siblings", onSmall)
	}
}
