package simulate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	corev1 "k8s.io/api/core/v1"
)

// statefulSet is a StatefulSet of REPLICAS pods of 1 CPU, POLICY pod
// management, with a claim of CLASS (WaitForFirstConsumer, EBS) when
// VOLUMES is set.
const statefulSet = `
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: BINDING
ALLOWED
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: REPLICAS
  podManagementPolicy: POLICY
  RETENTION
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
`

type stsCase struct {
	replicas, policy, binding, allowed, retention string
}

func (c stsCase) manifest() string {
	return strings.NewReplacer("REPLICAS", or(c.replicas, "3"), "POLICY", or(c.policy, "OrderedReady"),
		"BINDING", or(c.binding, "WaitForFirstConsumer"), "ALLOWED", c.allowed, "RETENTION", c.retention).Replace(statefulSet)
}

// play runs trace over objs and returns the sim at its end, to look into.
func play(t *testing.T, sc scenario, trace *Trace) (*sim, *Result) {
	t.Helper()
	s := prepare(t, sc, trace)
	return s, s.play(trace, nil)
}

// prepare is the sim of sc, trace validated and not yet played: a test
// may add its own events to look in at chosen instants.
func prepare(t *testing.T, sc scenario, trace *Trace) *sim {
	t.Helper()
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := sc.objects(t)
	s, err := newSim(Config{Name: "test", Objects: objs, InstanceTypes: its, Timing: DefaultTiming()})
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.Validate(objs); err != nil {
		t.Fatal(err)
	}
	return s
}

func hour() *Trace { return &Trace{Duration: d(time.Hour)} }

// TestStatefulSetStartsInOrder: under OrderedReady (the default) the
// StatefulSet controller makes db-1 only once db-0 runs, so each pod waits
// for the one before; under Parallel all three are made at the start.
func TestStatefulSetStartsInOrder(t *testing.T) {
	cases := []struct {
		policy  string
		ordered bool
	}{{"OrderedReady", true}, {"Parallel", false}}
	for _, c := range cases {
		t.Run(c.policy, func(t *testing.T) {
			s, _ := play(t, scenario{extra: stsCase{policy: c.policy}.manifest()}, hour())
			for i, name := range []string{"db-0", "db-1", "db-2"} {
				p := s.pods["default/"+name]
				if p == nil || p.node == nil {
					t.Fatalf("%s is not running at the end", name)
				}
				created := p.pod.CreationTimestamp.Time
				if i == 0 || !c.ordered {
					if !created.Equal(s.start) {
						t.Errorf("%s made at %s; want the start", name, created.Sub(s.start))
					}
					continue
				}
				prev := s.pods["default/db-"+string(rune('0'+i-1))]
				if started := prev.pod.Status.StartTime.Time; !created.Equal(started) || !created.After(s.start) {
					t.Errorf("%s made at %s; want when %s started, %s", name, created.Sub(s.start), prev.pod.Name, started.Sub(s.start))
				}
			}
		})
	}
}

// TestStatefulSetKeepsItsZone: db-0's claim waits for its first consumer,
// so its volume is made in the zone db-0 first lands in. When its NodePool
// changes to allow a second zone and the first is short of capacity, the
// drift replacement still has to be in the volume's zone: db-0 waits out
// the shortage rather than move away from its disk, and comes back under
// its own name with its own claim.
func TestStatefulSetKeepsItsZone(t *testing.T) {
	s0, _ := play(t, scenario{extra: stsCase{replicas: "1"}.manifest()}, hour())
	first := s0.pods["default/db-0"].node.labels[corev1.LabelTopologyZone]
	var other string
	for _, z := range s0.zones() {
		if z != first {
			other = z
			break
		}
	}
	// A label in the template drifts the node (its hash changes); the
	// zones allowed are both.
	relabelled := strings.Replace(strings.Split(strings.NewReplacer("CAPACITY", "on-demand", "POLICY", "WhenEmptyOrUnderutilized", "EXPIRE", "expireAfter: 720h").Replace(pool), "---")[0],
		"  template:\n    spec:\n", "  template:\n    metadata: {labels: {generation: two}}\n    spec:\n", 1)
	relabelled = strings.Replace(relabelled, "        - {key: kubernetes.io/arch, operator: In, values: [amd64]}",
		"        - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n        - {key: topology.kubernetes.io/zone, operator: In, values: ["+first+", "+other+"]}", 1)
	trace := &Trace{Duration: d(3 * time.Hour), Events: []Event{
		{At: d(time.Hour), Shortage: &Shortage{Zone: first, For: d(30 * time.Minute)}},
		{At: d(time.Hour), Apply: relabelled},
	}}
	s, res := play(t, scenario{extra: stsCase{replicas: "1"}.manifest()}, trace)
	p := s.pods["default/db-0"]
	if p == nil || p.node == nil {
		t.Fatalf("db-0 is not running at the end (problems %v)", res.Problems)
	}
	if res.Summary.Evictions == 0 {
		t.Fatalf("db-0 was never moved: the drift the NodePool change makes did not happen (disruptions %v)", res.Summary.Disruptions)
	}
	claim := s.store.Claim("default/data-db-0")
	if claim == nil || claim.Spec.VolumeName == "" {
		t.Fatalf("claim data-db-0 is %v; want it bound to a volume", claim)
	}
	if zone := p.node.labels[corev1.LabelTopologyZone]; zone != first {
		t.Errorf("db-0 ends in %s; want %s, where its volume is", zone, first)
	}
	if started := p.pod.Status.StartTime.Time; started.Before(s.start.Add(90 * time.Minute)) {
		t.Errorf("db-0 started again at %s; want after the shortage of its zone ends at 1h30m", started.Sub(s.start))
	}
}

// TestImmediateClaimsDecideTheZone: a claim of an Immediate class gets its
// volume at once, in a zone the class allows; the pod follows it there,
// not to the zone it would pick with no volume.
func TestImmediateClaimsDecideTheZone(t *testing.T) {
	s0, _ := play(t, scenario{extra: stsCase{replicas: "1", binding: "WaitForFirstConsumer"}.manifest()}, hour())
	free := s0.pods["default/db-0"].node.labels[corev1.LabelTopologyZone]
	var other string
	for _, z := range s0.zones() {
		if z != free {
			other = z
			break
		}
	}
	allowed := "allowedTopologies: [{matchLabelExpressions: [{key: topology.ebs.csi.aws.com/zone, values: [" + other + "]}]}]"
	s, _ := play(t, scenario{extra: stsCase{replicas: "1", binding: "Immediate", allowed: allowed}.manifest()}, hour())
	p := s.pods["default/db-0"]
	if p == nil || p.node == nil {
		t.Fatal("db-0 is not running at the end")
	}
	if zone := p.node.labels[corev1.LabelTopologyZone]; zone != other {
		t.Errorf("db-0 runs in %s; want %s, the only zone its Immediate class allows", zone, other)
	}
}

// TestStatefulSetScaleDown: scaled down, a StatefulSet removes its highest
// ordinals; their claims stay unless whenScaled is Delete, and scaled up
// again, db-2 is back with the claim it had.
func TestStatefulSetScaleDown(t *testing.T) {
	cases := []struct {
		retention string
		kept      bool
	}{{"", true}, {"persistentVolumeClaimRetentionPolicy: {whenScaled: Delete}", false}}
	for _, c := range cases {
		t.Run(or(c.retention, "Retain"), func(t *testing.T) {
			trace := &Trace{Duration: d(time.Hour), Events: []Event{{At: d(30 * time.Minute), Scale: &Scale{StatefulSet: "db", Replicas: 1}}}}
			s, _ := play(t, scenario{extra: stsCase{retention: c.retention}.manifest()}, trace)
			if s.pods["default/db-0"] == nil || s.pods["default/db-1"] != nil || s.pods["default/db-2"] != nil {
				t.Errorf("pods %v; want db-0 alone", sortedKeys(s.pods))
			}
			if kept := s.store.Claim("default/data-db-2") != nil; kept != c.kept {
				t.Errorf("claim data-db-2 kept: %v; want %v", kept, c.kept)
			}
		})
	}
}

// TestBarePodsAreLost: a bare Pod evicted (here by its node's expiry) is
// not made again, and the summary counts it; a Deployment's pod evicted
// alongside is.
func TestBarePodsAreLost(t *testing.T) {
	lone := "---\napiVersion: v1\nkind: Pod\nmetadata: {name: lone}\nspec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\n"
	trace := &Trace{Duration: d(2 * time.Hour), Events: []Event{{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 2}}}}
	s, res := play(t, scenario{extra: lone, expire: "expireAfter: 1h"}, trace)
	if s.pods["default/lone"] != nil {
		t.Errorf("the bare pod lone is still there after its node expired")
	}
	if res.Summary.LostPods != 1 {
		t.Errorf("lostPods %d; want 1", res.Summary.LostPods)
	}
	if web := len(s.owners[ownerKey(kindDeployment, "default", "web")].pods); web != 2 {
		t.Errorf("web has %d pods; want its 2 made again", web)
	}
}

// TestDeleteAndApplyPods: pods arrive (a bare Pod applied) and leave (the
// Pod deleted, then its Deployment) mid-run.
func TestDeleteAndApplyPods(t *testing.T) {
	lone := "apiVersion: v1\nkind: Pod\nmetadata: {name: lone}\nspec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\n"
	trace := &Trace{Duration: d(2 * time.Hour), Events: []Event{
		{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 4}},
		{At: d(10 * time.Minute), Apply: lone},
		{At: d(40 * time.Minute), Delete: &Delete{Kind: "Pod", Name: "lone"}},
		{At: d(time.Hour), Delete: &Delete{Kind: "Deployment", Name: "web"}},
	}}
	_, res := play(t, scenario{}, trace)
	for _, c := range []struct{ minute, pods int }{{5, 4}, {30, 5}, {50, 4}, {90, 0}} {
		if got := res.Samples[c.minute].Pods; got != c.pods {
			t.Errorf("%d pods at %dm; want %d", got, c.minute, c.pods)
		}
	}
}

// TestAttachLimits: kube-scheduler in the run binds pods with volumes where
// the planner fits them, so no node attaches more EBS volumes than its
// type can, however little CPU the pods ask.
func TestAttachLimits(t *testing.T) {
	sts := strings.Replace(stsCase{replicas: "60", policy: "Parallel"}.manifest(), `requests: {cpu: "1", memory: 1Gi}`, `requests: {cpu: 10m, memory: 16Mi}`, 1)
	s, _ := play(t, scenario{extra: sts}, hour())
	nodes := map[*simNode]int{}
	for _, p := range s.pods {
		if p.node == nil {
			t.Fatalf("%s is pending at the end", p.key)
		}
		nodes[p.node]++
	}
	for n, count := range nodes {
		if limit := n.it.AttachLimits["ebs.csi.aws.com"]; count > limit {
			t.Errorf("node %s (%s) runs %d pods with a volume each; its type attaches %d", n.name, n.it.Name, count, limit)
		}
	}
	if len(nodes) < 2 {
		t.Errorf("%d node for 60 volumes; no type attaches that many", len(nodes))
	}
}

// TestDaemonSetApplied: a DaemonSet applied mid-run takes room on every
// node from then on: the nodes launched after it leave its pod room, and
// its deletion gives the room back.
func TestDaemonSetApplied(t *testing.T) {
	agent := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 1500m}}}]}}}\n"
	trace := &Trace{Duration: d(2 * time.Hour), Events: []Event{
		{At: d(0), Scale: &Scale{Deployment: "web", Replicas: 4}},
		{At: d(30 * time.Minute), Apply: agent},
		{At: d(40 * time.Minute), Scale: &Scale{Deployment: "web", Replicas: 12}},
	}}
	s, _ := play(t, scenario{}, trace)
	checked := 0
	for _, n := range s.liveNodes() {
		if n.launched.Before(s.start.Add(30 * time.Minute)) {
			continue
		}
		used := int64(1500)
		for _, p := range n.pods {
			used += p.pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
		if alloc := n.it.Allocatable.Cpu().MilliValue(); used > alloc {
			t.Errorf("node %s (%s) holds %dm of CPU with the agent's 1500m; it has %dm", n.name, n.it.Name, used, alloc)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no node was launched after the DaemonSet")
	}
	// The pools' shared working-out holds the DaemonSets: a snapshot after
	// a change must not reuse the one from before it.
	before := s.snapshot(nil).Shared
	s.deleteDaemonSet("default/agent")
	if after := s.snapshot(nil).Shared; after == before {
		t.Error("the snapshot after the DaemonSet's deletion reuses the shared working-out from before it")
	}
	del := &Trace{Duration: d(2 * time.Hour), Events: append(trace.Events, Event{At: d(time.Hour), Delete: &Delete{Kind: "DaemonSet", Name: "agent"}})}
	s, _ = play(t, scenario{}, del)
	if len(s.daemonSets) != 0 {
		t.Errorf("%d DaemonSets after the delete; want none", len(s.daemonSets))
	}
}

// TestStatefulSetRollsOver: a changed template replaces a StatefulSet's
// pods one at a time from the highest ordinal under RollingUpdate (the
// default), each once the one before runs again, and leaves them under
// OnDelete; a ReplicaSet's pods keep their template.
func TestStatefulSetRollsOver(t *testing.T) {
	rs := "---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: cache}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: cache}}\n  template:\n    metadata: {labels: {app: cache}}\n    spec: {containers: [{name: c, image: IMAGE, resources: {requests: {cpu: 500m}}}]}\n"
	cases := []struct {
		strategy string
		rolled   bool
	}{{"", true}, {"updateStrategy: {type: OnDelete}", false}}
	for _, c := range cases {
		t.Run(or(c.strategy, "RollingUpdate"), func(t *testing.T) {
			sts := stsCase{retention: c.strategy}.manifest()
			changed := strings.Split(strings.Replace(sts, "image: pause", "image: pause:2", 1), "---")[2]
			trace := &Trace{Duration: d(2 * time.Hour), Events: []Event{
				{At: d(30 * time.Minute), Apply: changed},
				{At: d(30 * time.Minute), Apply: strings.Replace(rs, "IMAGE", "pause:2", 1)},
			}}
			s, _ := play(t, scenario{extra: sts + strings.Replace(rs, "IMAGE", "pause", 1)}, trace)
			at := func(name string) time.Duration { return s.pods["default/"+name].pod.CreationTimestamp.Sub(s.start) }
			// The order pods were made in: the run's pod sequence ends the UID.
			seq := func(name string) string { uid := string(s.pods["default/"+name].pod.UID); return uid[len(uid)-6:] }
			if !c.rolled {
				for _, name := range []string{"db-0", "db-1", "db-2"} {
					if at(name) >= 30*time.Minute {
						t.Errorf("%s was made again at %s under OnDelete", name, at(name))
					}
				}
				return
			}
			// A pod that binds at once lets the next go in the same instant.
			if !(30*time.Minute <= at("db-2") && seq("db-2") < seq("db-1") && seq("db-1") < seq("db-0")) {
				t.Errorf("db-2, db-1, db-0 made again at %s, %s, %s (sequence %s, %s, %s); want from 30m, one after another, the highest first",
					at("db-2"), at("db-1"), at("db-0"), seq("db-2"), seq("db-1"), seq("db-0"))
			}
			for _, p := range s.owners[ownerKey(kindStatefulSet, "default", "db")].pods {
				if p.pod.Spec.Containers[0].Image != "pause:2" {
					t.Errorf("%s runs %s after the roll-out", p.key, p.pod.Spec.Containers[0].Image)
				}
			}
			for _, p := range s.owners[ownerKey(kindReplicaSet, "default", "cache")].pods {
				if p.pod.Spec.Containers[0].Image != "pause" {
					t.Errorf("the ReplicaSet's %s was made again from the new template; a ReplicaSet leaves its pods", p.key)
				}
			}
		})
	}
}

// TestStatefulSetDeleted: deleted under whenDeleted: Delete, a StatefulSet
// takes every claim it made, a scaled-down ordinal's too; a job event for
// a deleted Job is a problem, not a crash.
func TestStatefulSetDeleted(t *testing.T) {
	job := "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: batch}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: pause}]}}}\n"
	trace := &Trace{Duration: d(time.Hour), Events: []Event{
		{At: d(10 * time.Minute), Scale: &Scale{StatefulSet: "db", Replicas: 1}},
		{At: d(20 * time.Minute), Delete: &Delete{Kind: "StatefulSet", Name: "db"}},
		{At: d(20 * time.Minute), Delete: &Delete{Kind: "Job", Name: "batch"}},
		{At: d(30 * time.Minute), Job: &JobRun{Job: "batch", RunFor: d(time.Minute)}},
	}}
	s, res := play(t, scenario{extra: stsCase{retention: "persistentVolumeClaimRetentionPolicy: {whenScaled: Retain, whenDeleted: Delete}"}.manifest() + job}, trace)
	for _, name := range []string{"data-db-0", "data-db-2"} {
		if s.store.Claim("default/"+name) != nil {
			t.Errorf("claim %s kept after the StatefulSet was deleted under whenDeleted: Delete", name)
		}
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "job default/batch, which a delete event removed, was not started") {
		t.Errorf("problems %q; want the job event after the Job's deletion", res.Problems)
	}
}

// TestBoundPods: the bound's pods keep their workload's namespace (an
// anti-affinity reaches only within it), and two workloads of one name,
// or two versions of one template, give pods of different names.
func TestBoundPods(t *testing.T) {
	s := &sim{}
	web := &owner{kind: kindDeployment, ns: "team-a", name: "web"}
	set := &owner{kind: kindStatefulSet, ns: "team-a", name: "web"}
	for _, o := range []*owner{web, set} {
		s.newVersion(o)
	}
	old := web.version
	web.template.Labels = map[string]string{"v": "2"}
	s.newVersion(web)
	seen := map[string]bool{}
	for _, c := range []struct {
		o       *owner
		version int
	}{{web, web.version}, {web, old}, {set, set.version}} {
		p := boundPod(c.o, c.version, 0)
		if p.Namespace != "team-a" {
			t.Errorf("%s's bound pod is in namespace %q; want team-a", c.o.kind, p.Namespace)
		}
		if seen[p.Name] {
			t.Errorf("two bound pods named %s", p.Name)
		}
		seen[p.Name] = true
	}
	if p := boundPod(web, old, 0); p.Labels["v"] != "" {
		t.Errorf("the older version's pod has the newer template's labels %v", p.Labels)
	}
}

// rollingAPI is a run of the Deployment api, 8 pods of image pause under
// strategy, whose template changes at 30m to pause:2. The new template asks
// for another instance category, so its pods wait for new nodes rather
// than take the room the old ones leave in the same instant: every step
// of the roll-out shows.
func rollingAPI(t *testing.T, strategy string) (*sim, *Trace) {
	t.Helper()
	const api = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  replicas: 8\n  STRATEGY\n  selector: {matchLabels: {app: api}}\n  template:\n    metadata: {labels: {app: api}}\n    spec: {nodeSelector: {karpenter.k8s.aws/instance-category: CATEGORY}, containers: [{name: c, image: IMAGE, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]}\n"
	manifest := func(image, category string) string {
		return strings.NewReplacer("STRATEGY", strategy, "IMAGE", image, "CATEGORY", category).Replace(api)
	}
	trace := &Trace{Duration: d(time.Hour), Events: []Event{{At: d(30 * time.Minute), Apply: manifest("pause:2", "c")}}}
	return prepare(t, scenario{policy: "WhenEmpty", extra: manifest("pause", "m")}, trace), trace
}

// TestDeploymentRollsOver: a Deployment whose template changes rolls over
// within its surge and unavailability (25% each by default, the surge
// rounded up), or under Recreate all at once; between any two instants of
// the run its pods number at most replicas+surge and at least
// replicas-unavailable of them run, and the roll-out takes several steps.
func TestDeploymentRollsOver(t *testing.T) {
	cases := []struct {
		strategy                string
		mostPods, fewestRunning int
		// gradual: some instant has both templates' pods, for at least
		// mixedFor when that is set.
		gradual  bool
		mixedFor time.Duration
	}{
		{"", 10, 6, true, 0},
		{"strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}", 8, 7, true, 0},
		// A new pod counts only a minute after it starts: eight steps
		// of at least a minute each.
		{"minReadySeconds: 60\n  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}", 8, 7, true, 8 * time.Minute},
		{"strategy: {rollingUpdate: {maxSurge: 100%, maxUnavailable: 0}}", 16, 8, false, 0},
		{"strategy: {type: Recreate}", 8, 0, false, 0},
	}
	for _, c := range cases {
		t.Run(or(c.strategy, "default"), func(t *testing.T) {
			s, trace := rollingAPI(t, c.strategy)
			o := s.owners[ownerKey(kindDeployment, "default", "api")]
			mostPods, fewestRunning, mixed, mixedFor := 0, 8, false, time.Duration(0)
			for at := 30 * time.Minute; at < time.Hour; at += time.Second {
				s.at(s.start.Add(at), func() {
					running, fresh := 0, 0
					for _, p := range o.pods {
						if p.node != nil {
							running++
						}
						if p.pod.Spec.Containers[0].Image == "pause:2" {
							fresh++
						}
					}
					if fresh > 0 && fresh < 8 {
						mixed, mixedFor = true, mixedFor+time.Second
					}
					mostPods, fewestRunning = max(mostPods, len(o.pods)), min(fewestRunning, running)
				})
			}
			s.play(trace, nil)
			if mixedFor < c.mixedFor {
				t.Errorf("both templates' pods ran for %s; want at least %s", mixedFor, c.mixedFor)
			}
			if mostPods != c.mostPods || fewestRunning != c.fewestRunning || mixed != c.gradual {
				t.Errorf("during the roll-out at most %d pods, at least %d running, both templates' pods at once %v; want %d, %d and %v",
					mostPods, fewestRunning, mixed, c.mostPods, c.fewestRunning, c.gradual)
			}
			for _, p := range o.pods {
				if p.pod.Spec.Containers[0].Image != "pause:2" {
					t.Errorf("%s runs %s after the roll-out", p.key, p.pod.Spec.Containers[0].Image)
				}
			}
			if len(o.pods) != 8 {
				t.Errorf("%d pods after the roll-out; want 8", len(o.pods))
			}
		})
	}
}

// TestDeploymentEvictedMidRoll: a pod of the old template evicted during a
// roll-out is made again by its own ReplicaSet, of the old template.
func TestDeploymentEvictedMidRoll(t *testing.T) {
	s, trace := rollingAPI(t, "strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}")
	o := s.owners[ownerKey(kindDeployment, "default", "api")]
	remade := ""
	s.at(s.start.Add(31*time.Minute), func() {
		old := s.oldPods(o)
		if len(old) == 0 || len(old) == 8 {
			t.Fatalf("%d pods of the old template at 31m; want a roll-out under way", len(old))
		}
		seq := s.podSeq
		s.evict(old[0], "test")
		for _, p := range o.pods {
			if strings.HasSuffix(string(p.pod.UID), fmt.Sprintf("-%06d", seq+1)) {
				remade = p.pod.Spec.Containers[0].Image
			}
		}
	})
	s.play(trace, nil)
	if remade != "pause" {
		t.Errorf("the evicted old pod was made again of image %q; want its own template's pause", remade)
	}
	for _, p := range o.pods {
		if p.pod.Spec.Containers[0].Image != "pause:2" {
			t.Errorf("%s runs %s after the roll-out", p.key, p.pod.Spec.Containers[0].Image)
		}
	}
}

// TestDeploymentScaledMidRoll: scaled down during a roll-out, below the
// old pods it still has, a Deployment deletes the old first and ends at
// its replicas, all of the new template.
func TestDeploymentScaledMidRoll(t *testing.T) {
	for _, replicas := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			s, trace := rollingAPI(t, "strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}")
			trace.Events = append(trace.Events, Event{At: d(31 * time.Minute), Scale: &Scale{Deployment: "api", Replicas: replicas}})
			s.play(trace, nil)
			o := s.owners[ownerKey(kindDeployment, "default", "api")]
			if len(o.pods) != replicas {
				t.Errorf("%d pods at the end; want %d", len(o.pods), replicas)
			}
			for _, p := range o.pods {
				if p.pod.Spec.Containers[0].Image != "pause:2" {
					t.Errorf("%s runs %s after the roll-out", p.key, p.pod.Spec.Containers[0].Image)
				}
			}
		})
	}
}
