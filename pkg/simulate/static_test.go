package simulate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
)

// staticPool is a static NodePool of m5.large beside the scenario's
// dynamic one; REPLICAS, EXPIRE and LABEL are replaced.
const staticPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: REPLICAS
  template:
    metadata: {labels: {team: LABEL}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: EXPIRE
`

func static(replicas, expire, label string) string {
	return strings.NewReplacer("REPLICAS", replicas, "EXPIRE", expire, "LABEL", label).Replace(staticPool)
}

// TestStaticNodePools: under StaticCapacity a static NodePool keeps its
// replicas through expiry and drift, drops nodes when its replicas go
// down, is left alone by consolidation, and its nodes count in the bound
// whatever the pods need; without the gate it is refused, and so is a
// NodePool switched between static and dynamic.
func TestStaticNodePools(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m5large := 0.0
	for _, it := range its {
		if it.Name == "m5.large" {
			m5large, _ = it.ListPrice("us-east-1a", "on-demand")
		}
	}
	apply := func(at time.Duration, doc string) Event { return Event{At: d(at), Apply: doc} }
	cases := []struct {
		name    string
		noGate  bool
		events  []Event
		expire  string
		nodes   int
		reasons map[string]int
		err     string
	}{
		{name: "three nodes kept for two hours", nodes: 3, reasons: map[string]int{}},
		{name: "expired nodes come back", expire: "90m", nodes: 3, reasons: map[string]int{"expired": 3}},
		{name: "a template change replaces them one for one", events: []Event{apply(30*time.Minute, static("3", "720h", "b"))}, nodes: 3, reasons: map[string]int{"drifted": 3}},
		{name: "replicas down to one", events: []Event{apply(30*time.Minute, static("1", "720h", "a"))}, nodes: 1, reasons: map[string]int{"scaled down": 2}},
		{name: "without the gate", noGate: true, err: "NodePool fixed: spec.replicas (a static NodePool) launches nodes only under the StaticCapacity feature gate; pass --feature-gates StaticCapacity=true"},
		{name: "made dynamic in place", events: []Event{apply(30*time.Minute, strings.Replace(static("3", "720h", "a"), "  replicas: 3\n", "", 1))},
			err: "NodePool fixed: a NodePool cannot switch between static (spec.replicas) and dynamic in place"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := scenario{extra: "---\n" + static("3", or(c.expire, "720h"), "a")}.objects(t)
			tr := &Trace{Duration: d(2 * time.Hour), Events: c.events}
			res, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming(), StaticCapacity: !c.noGate}, tr, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			last := res.Samples[len(res.Samples)-1]
			if last.Nodes != c.nodes || last.ByType["m5.large"] != c.nodes {
				t.Errorf("%d nodes at the end (%v), want %d m5.large", last.Nodes, last.ByType, c.nodes)
			}
			for reason, n := range c.reasons {
				if res.Summary.Disruptions[reason] != n {
					t.Errorf("%d nodes %s, want %d: %v", res.Summary.Disruptions[reason], reason, n, res.Summary.Disruptions)
				}
			}
			if len(c.reasons) == 0 && len(res.Summary.Disruptions) != 0 {
				t.Errorf("static nodes disrupted: %v", res.Summary.Disruptions)
			}
			// No pods: the bound is the static nodes' cheapest price.
			if len(c.events) == 0 && c.expire == "" && math.Abs(res.Summary.LPBoundCost-3*m5large*2) > 0.01 {
				t.Errorf("bound $%.4f, want three m5.large for two hours, $%.4f", res.Summary.LPBoundCost, 3*m5large*2)
			}
			if res.Summary.TotalCost < res.Summary.LPBoundCost-1e-6 {
				t.Errorf("cost $%.4f below the bound $%.4f", res.Summary.TotalCost, res.Summary.LPBoundCost)
			}
		})
	}
}

// TestStaticNodesTakePodsAndStay: pods run on a static pool's nodes, and
// when the workload shrinks consolidation removes the dynamic nodes and
// leaves the static ones, underused as they are.
func TestStaticNodesTakePodsAndStay(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := scenario{extra: "---\n" + static("3", "720h", "a")}.objects(t)
	res, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming(), StaticCapacity: true}, upAndDown(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Disruptions["underutilized"]+res.Summary.Disruptions["empty"] == 0 {
		t.Fatalf("nothing consolidated after the scale-down: %+v", res.Summary)
	}
	for _, dec := range res.Decisions {
		for _, n := range dec.Nodes {
			if strings.HasPrefix(n, "fixed-") {
				t.Errorf("static node %s disrupted: %+v", n, dec)
			}
		}
	}
	// The static nodes' room is free to the pods in one bound, but not of
	// any size: the bound must still count the dynamic nodes they need.
	if s := res.Summary; s.LPBoundCost < 0.7*s.TotalCost || s.LPBoundCost > s.TotalCost {
		t.Errorf("bound $%.4f for a cost of $%.4f", s.LPBoundCost, s.TotalCost)
	}
	if last := res.Samples[len(res.Samples)-1]; last.ByType["m5.large"] < 3 || last.Pending != 0 {
		t.Errorf("at the end %v with %d pending, want the three static m5.large and no pod waiting", last.ByType, last.Pending)
	}
}

// TestStaticNodesFillTheCommitments: a static pool that may launch
// m5.large or the cheaper c6a.large launches the m5.large its account's
// RIs pay for, as the controller's static provisioning does with the
// rooms the AWS provider gives every pool.
func TestStaticNodesFillTheCommitments(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ri := commitment.Commitments{ReservedInstances: []commitment.ReservedInstance{{ID: "ri-0", Type: "m5.large", Count: 3}}}
	doc := strings.Replace(static("3", "720h", "a"), "values: [m5.large]", "values: [m5.large, c6a.large]", 1)
	cases := []struct {
		name string
		cm   *commitment.Commitments
		want string
	}{
		{"at list prices", nil, "c6a.large"},
		{"under m5.large RIs", &ri, "m5.large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(Config{Name: "test", Objects: scenario{extra: "---\n" + doc}.objects(t), InstanceTypes: its, Timing: DefaultTiming(),
				StaticCapacity: true, Commitments: c.cm}, &Trace{Duration: d(time.Hour)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if last := res.Samples[len(res.Samples)-1]; last.ByType[c.want] != 3 {
				t.Errorf("static nodes %v, want three %s", last.ByType, c.want)
			}
		})
	}
}
