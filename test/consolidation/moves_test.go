package consolidation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/test/framework"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// moves traces the default namespace's pods through their ReplicaSets: a
// pod the ReplicaSet creates while it is short of pods replaces the pod
// whose deletion made it short, the earliest first, and carries that
// replica's moves on by one.
type moves struct {
	mu       sync.Mutex
	replicas int
	// depth is how many moves each live pod's replica has been through.
	depth map[types.UID]int
	gone  map[types.UID]bool
	live  map[string]int
	// owed are, per ReplicaSet, the depths of the pods whose deletion left
	// it short, in deletion order.
	owed    map[string][]int
	created map[string]int
	longest int
}

// watchMoves starts tracing pods; replicas is each ReplicaSet's size from
// the scale-down on, so deletions that leave a ReplicaSet with at least
// that many pods are the scale-down itself, not moves.
func watchMoves(t *testing.T, replicas int) *moves {
	m := &moves{replicas: replicas, depth: map[types.UID]int{}, gone: map[types.UID]bool{}, live: map[string]int{}, owed: map[string][]int{}, created: map[string]int{}}
	cs, err := kubernetes.NewForConfig(framework.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(m); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the pod informer did not sync")
	}
	return m
}

func replicaSet(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" {
		return ref.Name
	}
	return ""
}

func (m *moves) OnAdd(obj interface{}, initial bool) {
	p, ok := obj.(*corev1.Pod)
	rs := ""
	if ok {
		rs = replicaSet(p)
	}
	if rs == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[rs]++
	if initial {
		m.depth[p.UID] = 0
		return
	}
	m.created[rs]++
	d := 1
	if q := m.owed[rs]; len(q) > 0 {
		d, m.owed[rs] = q[0]+1, q[1:]
	}
	m.depth[p.UID] = d
	m.longest = max(m.longest, d)
	if p.DeletionTimestamp != nil {
		m.deleted(p, rs)
	}
}

func (m *moves) OnUpdate(_, obj interface{}) {
	if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
		if rs := replicaSet(p); rs != "" {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.deleted(p, rs)
		}
	}
}

func (m *moves) OnDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		if rs := replicaSet(p); rs != "" {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.deleted(p, rs)
		}
	}
}

// deleted counts a pod out of its ReplicaSet once, when it starts to go.
func (m *moves) deleted(p *corev1.Pod, rs string) {
	if m.gone[p.UID] {
		return
	}
	m.gone[p.UID] = true
	m.live[rs]--
	if m.live[rs] < m.replicas {
		m.owed[rs] = append(m.owed[rs], m.depth[p.UID])
	}
}

// result is the moves in all, per ReplicaSet, and the most for one replica.
func (m *moves) result() (int, map[string]int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	total, per := 0, map[string]int{}
	for rs, n := range m.created {
		total += n
		per[rs] = n
	}
	return total, per, m.longest
}

// mixedShapes are four pod shapes, CPU-heavy to memory-heavy.
var mixedShapes = [][2]string{{"2", "1Gi"}, {"500m", "4Gi"}, {"1", "2Gi"}, {"250m", "256Mi"}}

// mixed applies the test NodePool with consolidateAfter and a Deployment
// prefix-i of each shape with replicas each, and returns the pool's YAML.
func mixed(t *testing.T, prefix, consolidateAfter string, replicas int) string {
	pool := strings.Replace(framework.PoolAndClass, "  template:\n", "  disruption: {consolidateAfter: "+consolidateAfter+"}\n  template:\n", 1)
	framework.Kubectl(t, pool, "apply", "-f", "-")
	for i, s := range mixedShapes {
		framework.Kubectl(t, framework.Deployment(fmt.Sprintf("%s-%d", prefix, i), replicas, s[0], s[1], ""), "apply", "-f", "-")
	}
	return pool
}

func scaleMixed(t *testing.T, prefix string, replicas int) {
	for i := range mixedShapes {
		framework.Kubectl(t, "", "scale", fmt.Sprintf("deployment/%s-%d", prefix, i), fmt.Sprintf("--replicas=%d", replicas))
	}
}

func mixedRunning(t *testing.T, prefix string, want int) (bool, string) {
	n := 0
	for i := range mixedShapes {
		c, _ := framework.Running(t, map[string]string{"app": fmt.Sprintf("%s-%d", prefix, i)})
		n += c
	}
	return n == want, fmt.Sprintf("%d of %d pods running", n, want)
}

func clusterPrice(claims []v1.NodeClaim, its []*cloudprovider.InstanceType) float64 {
	total := 0.0
	for _, nc := range claims {
		for _, it := range its {
			if it.Name != nc.Labels[corev1.LabelInstanceTypeStable] {
				continue
			}
			for _, o := range it.Offerings {
				if o.Zone == nc.Labels[corev1.LabelTopologyZone] && o.CapacityType == nc.Labels[v1.LabelCapacityType] {
					total += o.Price
				}
			}
		}
	}
	return total
}
