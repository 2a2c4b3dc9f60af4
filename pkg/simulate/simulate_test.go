package simulate

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	"github.com/joiner-autoscaler/joiner/pkg/manifests"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pool is a small NodePool for scenarios; %s parts are replaced.
const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [CAPACITY]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      EXPIRE
  disruption:
    consolidationPolicy: POLICY
    consolidateAfter: 0s
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      ANNOTATIONS
    spec:
      containers: [{name: web, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`

type scenario struct {
	capacity, policy, expire, annotations, extra string
	// weight is the default pool's, when set.
	weight string
}

func (sc scenario) objects(t *testing.T) *manifests.Objects {
	t.Helper()
	r := strings.NewReplacer("CAPACITY", or(sc.capacity, "on-demand"), "POLICY", or(sc.policy, "WhenEmptyOrUnderutilized"),
		"EXPIRE", or(sc.expire, "expireAfter: 720h"), "ANNOTATIONS", or(sc.annotations, "annotations: {}"))
	doc := r.Replace(pool)
	if sc.weight != "" {
		doc = strings.Replace(doc, "    consolidateAfter: 0s\n", "    consolidateAfter: 0s\n  weight: "+sc.weight+"\n", 1)
	}
	objs, err := manifests.Parse("scenario", strings.NewReader(doc+sc.extra))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// upAndDown is 40 pods for an hour, then 8 for two.
func upAndDown() *Trace {
	return &Trace{Duration: d(3 * time.Hour), Events: []Event{
		{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 40}},
		{At: d(time.Hour), Scale: &Scale{Deployment: "web", Replicas: 8}},
	}}
}

func run(t *testing.T, objs *manifests.Objects, trace *Trace, timing func(*Timing)) *Result {
	t.Helper()
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tm := DefaultTiming()
	if timing != nil {
		timing(&tm)
	}
	res, err := Run(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: tm}, trace, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestScenarios plants one behaviour per case and checks that the run shows it.
func TestScenarios(t *testing.T) {
	cases := []struct {
		name   string
		sc     scenario
		trace  func() *Trace
		timing func(*Timing)
		check  func(t *testing.T, r *Result)
	}{{
		name: "underutilized nodes are replaced after the scale-down", trace: upAndDown,
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["underutilized"]+r.Summary.Disruptions["empty"] == 0 || r.Summary.Evictions == 0 {
				t.Errorf("no consolidation after the scale-down: %+v", r.Summary)
			}
		},
	}, {
		name: "WhenEmpty evicts nothing", sc: scenario{policy: "WhenEmpty"}, trace: upAndDown,
		check: func(t *testing.T, r *Result) {
			if r.Summary.Evictions != 0 || r.Summary.Disruptions["underutilized"] != 0 {
				t.Errorf("WhenEmpty evicted pods: %+v", r.Summary)
			}
			if r.Blocked["consolidationPolicy is WhenEmpty and"] == 0 {
				t.Errorf("no pass said WhenEmpty kept a node: %v", r.Blocked)
			}
		},
	}, {
		name: "a PDB allowing no disruption keeps the nodes", trace: upAndDown,
		sc: scenario{extra: "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec: {maxUnavailable: 0, selector: {matchLabels: {app: web}}}\n"},
		check: func(t *testing.T, r *Result) {
			if r.Summary.Evictions != 0 {
				t.Errorf("evicted %d pods against the PDB", r.Summary.Evictions)
			}
			if r.Blocked["PDB default/web blocks the"] == 0 {
				t.Errorf("no pass named the PDB: %v", r.Blocked)
			}
		},
	}, {
		name: "do-not-disrupt pods keep their nodes", trace: upAndDown,
		sc: scenario{annotations: `annotations: {karpenter.sh/do-not-disrupt: "true"}`},
		check: func(t *testing.T, r *Result) {
			if r.Summary.Evictions != 0 {
				t.Errorf("evicted %d do-not-disrupt pods", r.Summary.Evictions)
			}
		},
	}, {
		name: "do-not-disrupt for 30m protects for 30 minutes from the pod's start", trace: upAndDown,
		sc: scenario{annotations: `annotations: {karpenter.sh/do-not-disrupt: "30m"}`},
		check: func(t *testing.T, r *Result) {
			if r.Summary.Evictions == 0 {
				t.Errorf("nothing evicted after the protection ended: %+v", r.Summary)
			}
		},
	}, {
		name: "the bound's cost covers the run's duration",
		trace: func() *Trace {
			return &Trace{Duration: d(time.Hour), Events: upAndDown().Events[:1]}
		},
		check: func(t *testing.T, r *Result) {
			if want := r.Samples[1].BoundPerHour; math.Abs(r.Summary.LPBoundCost-want) > 1e-3 {
				t.Errorf("LP bound cost $%.4f over an hour of a constant bound of $%.4f/h", r.Summary.LPBoundCost, want)
			}
		},
	}, {
		name: "expireAfter replaces nodes", sc: scenario{expire: "expireAfter: 1h"}, trace: upAndDown,
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["expired"] == 0 {
				t.Errorf("no node expired: %+v", r.Summary)
			}
		},
	}, {
		name: "spot interruptions evict and the pods are provisioned again", sc: scenario{capacity: "spot"},
		trace:  func() *Trace { return &Trace{Duration: d(2 * time.Hour), Events: upAndDown().Events[:1]} },
		timing: func(t *Timing) { t.SpotInterruptionsPerHour = 0.5 },
		check: func(t *testing.T, r *Result) {
			if r.Summary.EvictionsByReason["interrupted"] == 0 {
				t.Fatalf("no interruption: %+v", r.Summary)
			}
			if last := r.Samples[len(r.Samples)-1]; last.Pending != 0 || last.Pods != 40 {
				t.Errorf("pods not running again at the end: %+v", last)
			}
		},
	}, {
		name: "a capacity shortage fails the launch, and the plan avoids the offering",
		trace: func() *Trace {
			tr := upAndDown()
			tr.Events = append([]Event{{At: d(0), Shortage: &Shortage{CapacityType: "on-demand", Zone: "us-east-1a", For: d(time.Hour)}}}, tr.Events...)
			return tr
		},
		check: func(t *testing.T, r *Result) {
			if r.Summary.LaunchesFailed == 0 {
				t.Errorf("no launch failed: %+v", r.Summary)
			}
			if r.Samples[30].Pending != 0 {
				t.Errorf("pods still pending after 30 minutes: %+v", r.Samples[30])
			}
		},
	}, {
		name: "a NodePool change drifts its nodes",
		trace: func() *Trace {
			tr := upAndDown()
			tr.Events = append(tr.Events[:1], Event{At: d(30 * time.Minute), Apply: strings.Split(strings.NewReplacer("CAPACITY", "on-demand", "POLICY", "WhenEmpty",
				"EXPIRE", "expireAfter: 700h").Replace(pool), "---")[0]})
			return tr
		},
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["drifted"] == 0 {
				t.Errorf("no node drifted: %+v", r.Summary)
			}
		},
	}, {
		name: "an EC2NodeClass's AMI change drifts its nodes", trace: classChange("amiSelectorTerms: [{alias: al2023@v20240807}]"),
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["drifted"] == 0 {
				t.Errorf("no node drifted: %+v", r.Summary)
			}
		},
	}, {
		name: "an EC2NodeClass's kubelet change drifts its nodes", trace: classChange("kubelet: {maxPods: 50}"),
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["drifted"] == 0 {
				t.Errorf("no node drifted: %+v", r.Summary)
			}
		},
	}, {
		name: "an EC2NodeClass's subnet change drifts nothing", trace: classChange("subnetSelectorTerms: [{tags: {karpenter.sh/discovery: other}}]"),
		check: func(t *testing.T, r *Result) {
			if r.Summary.Disruptions["drifted"] != 0 {
				t.Errorf("nodes drifted: %+v", r.Summary)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, run(t, c.sc.objects(t), c.trace(), c.timing))
		})
	}
}

// TestRunIsRepeatable: the same inputs give the same run, which is what
// makes two configurations' difference theirs.
func TestRunIsRepeatable(t *testing.T) {
	sc := scenario{capacity: "spot"}
	timing := func(t *Timing) { t.SpotInterruptionsPerHour = 0.3 }
	a := run(t, sc.objects(t), upAndDown(), timing)
	b := run(t, sc.objects(t), upAndDown(), timing)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a.Summary, b.Summary)
	}
	if a.Summary.TotalCost < a.Summary.LPBoundCost {
		t.Errorf("cost $%.2f below its lower bound $%.2f", a.Summary.TotalCost, a.Summary.LPBoundCost)
	}
}

// classChange is upAndDown with the EC2NodeClass applied again at 30
// minutes, its field named in change's first key replaced by change.
func classChange(change string) func() *Trace {
	return func() *Trace {
		class := strings.Split(pool, "---\n")[1]
		key := strings.SplitN(change, ":", 2)[0]
		var lines []string
		found := false
		for _, l := range strings.Split(class, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), key+":") {
				l, found = "  "+change, true
			}
			lines = append(lines, l)
		}
		if !found {
			lines = append(lines[:len(lines)-1], "  "+change, "")
		}
		tr := upAndDown()
		tr.Events = append(tr.Events[:1], Event{At: d(30 * time.Minute), Apply: strings.Join(lines, "\n")})
		return tr
	}
}

func d(x time.Duration) metav1.Duration { return metav1.Duration{Duration: x} }

// TestRefusedAtStart: what the simulator does not model is refused with
// the fix, rather than left out of the run.
func TestRefusedAtStart(t *testing.T) {
	cases := []struct {
		name, extra string
		trace       *Trace
		want        string
		policy      string
	}{
		{"a bare pod on a node -f does not give", "---\napiVersion: v1\nkind: Pod\nmetadata: {name: lone}\nspec: {nodeName: gone, containers: [{name: c, image: pause}]}\n", upAndDown(),
			"pod default/lone: spec.nodeName gone is not a Node of -f", ""},
		{"a ReplicaSet's pod given as a Pod", "---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-abc, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9, uid: u, controller: true}]}\nspec: {containers: [{name: c, image: pause}]}\n", upAndDown(),
			"pod default/web-abc: its ReplicaSet web-7d9 makes it; give the workload", ""},
		{"a Deployment's ReplicaSet given too", "---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d9, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u, controller: true}]}\nspec: {replicas: 1, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: pause}]}}}\n", upAndDown(),
			"replicaset default/web-7d9: its Deployment web makes it; give the Deployment", ""},
		{"a StatefulSet applied with a partition", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {replicas: 2, serviceName: db, updateStrategy: {rollingUpdate: {partition: 1}}, selector: {matchLabels: {app: db}}, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: pause}]}}}\n"}}},
			"events[0] (at 1m0s).apply: statefulset default/db: spec.updateStrategy.rollingUpdate: a partition", ""},
		{"a paused Deployment applied", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2, paused: true, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: pause:2}]}}}\n"}}},
			"events[0] (at 1m0s).apply: deployment default/web: spec.paused: a paused Deployment is not modelled; unpause it or leave it out", ""},
		{"a Deployment's surge that is no count or percentage", "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec: {replicas: 2, strategy: {rollingUpdate: {maxSurge: lots}}, selector: {matchLabels: {app: api}}, template: {metadata: {labels: {app: api}}, spec: {containers: [{name: c, image: pause}]}}}\n", upAndDown(),
			"deployment default/api: spec.strategy.rollingUpdate.maxSurge: ", ""},
		{"a pod applied onto a node", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: "apiVersion: v1\nkind: Pod\nmetadata: {name: lone}\nspec: {nodeName: n1, containers: [{name: c, image: pause}]}\n"}}},
			"events[0] (at 1m0s).apply: pod default/lone: spec.nodeName: a pod applied during a run is placed by the run", ""},
		{"an EC2NodeClass deleted mid-run", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Delete: &Delete{Kind: "EC2NodeClass", Name: "default"}}}},
			`events[0] (at 1m0s).delete.kind: "EC2NodeClass" cannot be deleted during a run; use Deployment, StatefulSet, ReplicaSet, Job, Pod, DaemonSet, PodDisruptionBudget or NodePool (an EC2NodeClass is held by its finalizer while nodes use it: delete the NodePools that name it)`, ""},
		{"a NodePool deleted with a namespace", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Delete: &Delete{Kind: "NodePool", Name: "default/default"}}}},
			`events[0] (at 1m0s).delete.name: "default/default": a NodePool has no namespace; give its name alone`, ""},
		{"a NodePool deleted that is nowhere", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Delete: &Delete{Kind: "NodePool", Name: "spot"}}}},
			`events[0] (at 1m0s).delete.name: NodePool spot is not in the manifests or an earlier apply; fix the name`, ""},
		{"a StatefulSet scaled that is nowhere", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Scale: &Scale{StatefulSet: "db", Replicas: 2}}}},
			"events[0] (at 1m0s).scale.statefulSet: StatefulSet default/db is not in the manifests", ""},
		{"a scale of two workloads", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute), Scale: &Scale{Deployment: "web", StatefulSet: "db", Replicas: 2}}}},
			"events[0] (at 1m0s).scale: set exactly one of deployment, statefulSet and replicaSet (2 set)", ""},
		{"a LimitRange applied mid-run", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: "apiVersion: v1\nkind: LimitRange\nmetadata: {name: defaults}\nspec: {limits: [{type: Container, defaultRequest: {cpu: 100m}}]}\n"}}},
			"events[0] (at 1m0s).apply: only NodePools, EC2NodeClasses, Deployments, StatefulSets, ReplicaSets, Jobs, Pods, DaemonSets and PodDisruptionBudgets", ""},
		{"a NodePool applied before the EC2NodeClass it names", "", &Trace{Duration: d(3 * time.Hour), Events: []Event{
			{At: d(2 * time.Hour), Apply: strings.NewReplacer(" KUBELET", "", "name: default", "name: late").Replace(classOf)},
			{At: d(time.Hour), Apply: strings.Replace(strings.Split(strings.NewReplacer("CAPACITY", "on-demand", "POLICY", "WhenEmpty", "EXPIRE", "expireAfter: 720h").Replace(pool), "---")[0], "name: default}", "name: late}", 1)}}},
			"events[1] (at 1h0m0s).apply: NodePool default: spec.template.spec.nodeClassRef names no EC2NodeClass", ""},
		{"a NodePool applied with an EC2NodeClass that is nowhere", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: strings.Replace(strings.Split(strings.NewReplacer("CAPACITY", "on-demand", "POLICY", "WhenEmpty", "EXPIRE", "expireAfter: 720h").Replace(pool), "---")[0], "name: default}", "name: nowhere}", 1)}}},
			"events[0] (at 1m0s).apply: NodePool default: spec.template.spec.nodeClassRef names no EC2NodeClass", ""},
		{"a budget whose schedule cron cannot read", "", upAndDown(), `NodePool default: spec.disruption.budgets[0]: invalid schedule "61 * * * *"`,
			"WhenEmptyOrUnderutilized\n    budgets: [{nodes: \"0\", schedule: \"61 * * * *\", duration: 1h}]"},
		{"a drift budget whose schedule never fires", "", upAndDown(), `NodePool default: spec.disruption.budgets[1]: schedule "0 0 30 2 *" never fires`,
			"WhenEmptyOrUnderutilized\n    budgets: [{nodes: \"10%\"}, {nodes: \"0\", reasons: [Drifted], schedule: \"0 0 30 2 *\", duration: 1h}]"},
		{"a NodePool applied with a budget that cannot be read", "", &Trace{Duration: d(time.Hour), Events: []Event{{At: d(time.Minute),
			Apply: strings.Split(strings.NewReplacer("CAPACITY", "on-demand", "POLICY", "WhenEmptyOrUnderutilized\n    budgets: [{nodes: \"0\", schedule: \"61 * * * *\", duration: 1h}]",
				"EXPIRE", "expireAfter: 720h").Replace(pool), "---")[0]}}},
			`events[0] (at 1m0s).apply: NodePool default: spec.disruption.budgets[0]: invalid schedule "61 * * * *"`, ""},
	}
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(Config{Name: "test", Objects: scenario{extra: c.extra, policy: c.policy}.objects(t), InstanceTypes: its, Timing: DefaultTiming()}, c.trace, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}
