package scheduling

import (
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	corev1 "k8s.io/api/core/v1"
)

func withPodClaim(p *corev1.Pod) {
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("gpu-template")}}
}

func withContainerClaim(p *corev1.Pod) {
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
}

func ptrTo[T any](v T) *T { return &v }

// Pods with DRA resource claims are not planned for, with Karpenter's
// reason, while their neighbours are; a DaemonSet that claims devices
// takes no room on new nodes (IGNORE_DRA_REQUESTS=true, the only value
// Joiner accepts).
func TestResourceClaimsAreNotPlannedFor(t *testing.T) {
	od := onDemandPool("default")
	cases := []solveCase{
		{name: "a pod-level claim", pools: []*v1.NodePool{od},
			pods:  []*corev1.Pod{mkPod("claims", "1", "1Gi", withPodClaim)},
			check: wantUnschedulable(1, "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter")},
		{name: "a container claim", pools: []*v1.NodePool{od},
			pods:  []*corev1.Pod{mkPod("claims", "1", "1Gi", withContainerClaim)},
			check: wantUnschedulable(1, "pod has Dynamic Resource Allocation requirements")},
		{name: "a pod with a claim beside an identical one without", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("claims", "1", "1Gi", withPodClaim), mkPod("plain", "1", "1Gi")},
			check: func(t *testing.T, p *Plan) {
				wantUnschedulable(1, "Dynamic Resource Allocation")(t, p)
				if p.Unschedulable[0].Pod.Name != "claims" || len(p.NewNodeClaims) != 1 || len(p.NewNodeClaims[0].Pods) != 1 || p.NewNodeClaims[0].Pods[0].Name != "plain" {
					t.Fatalf("want plain alone on one new node:\n%s", summary(p))
				}
			}},
		{name: "a DaemonSet with claims adds no overhead", pools: []*v1.NodePool{od},
			pods: []*corev1.Pod{mkPod("p", "1300m", "1Gi")},
			mod: func(s *Snapshot) {
				s.DaemonSets = []*corev1.Pod{daemonSetPod("device-agent", "700m", "100Mi", withPodClaim)}
			},
			check: func(t *testing.T, p *Plan) {
				wantNodes(1)(t, p)
				if got := p.NewNodeClaims[0].Requests.CPU; got != 1300 {
					t.Fatalf("requests %dm cpu, want 1300m: the claiming DaemonSet was counted", got)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := solve(t, tc.pools, tc.pods, func(s *Snapshot) {
				if tc.mod != nil {
					tc.mod(s)
				}
			})
			tc.check(t, p)
		})
	}
}
