package disruption

import (
	"math"
	"strings"
	"testing"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProtected(t *testing.T) {
	labelled := func(p *corev1.Pod) *corev1.Pod { p.Labels = map[string]string{"app": "web"}; return p }
	pdb := func(name string, allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	daemon := pod("ds", "100m", "64Mi")
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", APIVersion: "apps/v1", Name: "ds"}}
	daemon.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	dnd := pod("keep", "1", "1Gi")
	dnd.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// started is a pod with do-not-disrupt: value that started ago.
	started := func(value string, ago time.Duration) *corev1.Pod {
		p := pod("batch", "1", "1Gi")
		p.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: value}
		if ago >= 0 {
			p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)}
		}
		return p
	}
	cases := []struct {
		name      string
		node      *corev1.Node
		pods      []*corev1.Pod
		pdbs      []policyv1.PodDisruptionBudget
		nominated []string
		price     float64
		want      string
	}{
		{name: "nothing protects it", pods: []*corev1.Pod{pod("p", "1", "1Gi")}, want: ""},
		{name: "do-not-disrupt on the node", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.AnnotationDoNotDisrupt: "true"}}}, want: `node has "karpenter.sh/do-not-disrupt: true"`},
		{name: "do-not-disrupt on a pod", pods: []*corev1.Pod{dnd}, want: `pod default/keep has "karpenter.sh/do-not-disrupt: true"`},
		{name: "a 30m do-not-disrupt 10 minutes after the start", pods: []*corev1.Pod{started("30m", 10*time.Minute)}, want: `pod default/batch has "karpenter.sh/do-not-disrupt: 30m"`},
		{name: "a 30m do-not-disrupt 30 minutes after the start", pods: []*corev1.Pod{started("30m", 30*time.Minute)}, want: ""},
		{name: "a 30m do-not-disrupt on a pod not started yet", pods: []*corev1.Pod{started("30m", -1)}, want: `pod default/batch has "karpenter.sh/do-not-disrupt: 30m"`},
		{name: "a do-not-disrupt that is neither true nor a duration", pods: []*corev1.Pod{started("yes", 0)}, want: ""},
		{name: "a DaemonSet pod's do-not-disrupt does not count", pods: []*corev1.Pod{daemon}, want: ""},
		{name: "a PDB allowing no eviction", pods: []*corev1.Pod{labelled(pod("w", "1", "1Gi"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("web", 0)}, want: "PDB default/web blocks the eviction of pod default/w"},
		{name: "a PDB allowing an eviction", pods: []*corev1.Pod{labelled(pod("w", "1", "1Gi"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("web", 1)}, want: ""},
		{name: "two PDBs on one pod", pods: []*corev1.Pod{labelled(pod("w", "1", "1Gi"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("a", 1), pdb("b", 1)}, want: "covered by more than one PDB (a, b)"},
		{name: "no known price does not protect a node from drift", price: math.Inf(1), want: ""},
		{name: "nominated for one pending pod", nominated: []string{"default/p-0"}, want: "nominated for pending pod default/p-0, which the provisioner"},
		{name: "nominated for several", nominated: []string{"default/p-0", "default/p-1", "default/p-2"}, want: "nominated for pending pod default/p-0 and 2 other(s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = &corev1.Node{}
			}
			node.Labels = map[string]string{corev1.LabelTopologyZone: "us-east-1a"}
			c := Candidate{InstanceType: "c6a.large", CapacityType: "on-demand", Price: 0.1}
			if tc.price != 0 {
				c.Price = tc.price
			}
			got := Protected(c, node, tc.pods, tc.pdbs, tc.nominated, now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
