package scheduling

import (
	"errors"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StaticNodeClaim plans one node of a static NodePool (spec.replicas,
// StaticCapacity): a node kept for its own sake, launched with no pods. It
// is the plan of a placeholder pod that asks for nothing, tolerates
// everything and may run only in this pool, so the node is the pool's
// cheapest that its DaemonSets fit on, with the launch options, minValues
// and requirements any of the pool's NodeClaims gets. The pool's limits are
// the caller's to keep (limits.nodes, all a static pool may set).
func StaticNodeClaim(pool NodePool, daemonSets []*corev1.Pod, opts Options) (*NewNodeClaim, error) {
	placeholder := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "joiner-static", Name: pool.NodePool.Name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1.LabelNodePool: pool.NodePool.Name},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{{Name: "placeholder"}},
		},
	}
	pool.InUse = nil
	plan := Solve(Snapshot{Pods: []*corev1.Pod{placeholder}, NodePools: []NodePool{pool}, DaemonSets: daemonSets}, opts)
	if len(plan.NewNodeClaims) != 1 {
		if len(plan.Unschedulable) > 0 {
			return nil, errors.New(plan.Unschedulable[0].Reason)
		}
		return nil, errors.New("no instance type of the NodePool can launch")
	}
	nc := plan.NewNodeClaims[0]
	nc.Pods = nil
	return nc, nil
}
