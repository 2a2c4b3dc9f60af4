package instancetype

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// DiscoveredTTL is how long a memory capacity learned from a node is kept
// without a node confirming it: Karpenter's 60 days.
const DiscoveredTTL = 60 * 24 * time.Hour

// Discovered is the memory capacity that registered nodes reported, per
// instance type and set of images. The estimate (EC2's memory less
// VM_MEMORY_OVERHEAD_PERCENT) is a guess that is wrong both ways: too high,
// a pod planned onto a new node does not fit once the kubelet reports; too
// low, nodes are bigger than needed. A node's own report is the truth for
// every node of its type booted from the same images, as Karpenter learns
// it. The smallest report wins: nodes of a type differ by a few MiB, and a
// plan that counts on the largest would not fit on the others.
//
// Its methods are safe for concurrent use.
type Discovered struct {
	clock clock.Clock
	seq   atomic.Uint64
	mu    sync.Mutex
	byKey map[string]discovered
}

type discovered struct {
	memory  resource.Quantity
	expires time.Time
}

// NewDiscovered returns an empty store.
func NewDiscovered(clk clock.Clock) *Discovered {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Discovered{clock: clk, byKey: map[string]discovered{}}
}

// Observe records the memory capacity a node of the type reported, booted
// from one of amis (the class's images when it launched); it reports
// whether the capacity used for that type changed.
func (d *Discovered) Observe(instanceType string, amis []awsv1.AMI, memory resource.Quantity) bool {
	if memory.Sign() <= 0 {
		return false
	}
	key := discoveredKey(instanceType, amis)
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, ok := d.byKey[key]
	if ok && now.Before(cur.expires) && cur.memory.Cmp(memory) < 0 {
		return false
	}
	changed := !ok || !now.Before(cur.expires) || cur.memory.Cmp(memory) != 0
	d.byKey[key] = discovered{memory: memory, expires: now.Add(DiscoveredTTL)}
	if changed {
		d.seq.Add(1)
	}
	return changed
}

// Memory is the memory capacity nodes of the type reported under amis.
func (d *Discovered) Memory(instanceType string, amis []awsv1.AMI) (resource.Quantity, bool) {
	key := discoveredKey(instanceType, amis)
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, ok := d.byKey[key]
	if !ok {
		return resource.Quantity{}, false
	}
	if !d.clock.Now().Before(cur.expires) {
		delete(d.byKey, key)
		return resource.Quantity{}, false
	}
	return cur.memory, true
}

// SeqNum changes whenever a type's discovered capacity does, so that lists
// computed before are computed again.
func (d *Discovered) SeqNum() uint64 { return d.seq.Load() }

// discoveredKey names a type under a set of images: another image (a new
// AMI release) may reserve memory differently, so what was learned under
// the old ones does not carry over, as in Karpenter.
func discoveredKey(instanceType string, amis []awsv1.AMI) string {
	return instanceType + "/" + amisKey(amis)
}

// amisKey is the class's images, in any order.
func amisKey(amis []awsv1.AMI) string {
	ids := make([]string, len(amis))
	for i, a := range amis {
		ids[i] = a.ID
	}
	slices.Sort(ids)
	return strings.Join(slices.Compact(ids), ",")
}

// withDiscovered is capacity and allocatable with the discovered memory in
// place of the estimate: the reserved memory and the eviction threshold the
// estimate left out stay left out.
func withDiscovered(capacity, allocatable corev1.ResourceList, memory resource.Quantity) (corev1.ResourceList, corev1.ResourceList) {
	estimate := capacity[corev1.ResourceMemory]
	capacity[corev1.ResourceMemory] = memory
	q := allocatable[corev1.ResourceMemory]
	q.Add(memory)
	q.Sub(estimate)
	if q.Sign() < 0 {
		q = *resource.NewQuantity(0, resource.BinarySI)
	}
	allocatable[corev1.ResourceMemory] = q
	return capacity, allocatable
}
