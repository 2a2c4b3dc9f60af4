package scheduling

import (
	"fmt"
	"sync"
	"testing"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	catalogOnce  sync.Once
	catalogTypes []*cloudprovider.InstanceType
)

func testCatalog(t testing.TB) []*cloudprovider.InstanceType {
	catalogOnce.Do(func() {
		var err error
		catalogTypes, err = catalog.InstanceTypes(catalog.Options{})
		if err != nil {
			panic(err)
		}
	})
	return catalogTypes
}

type podOpt func(*corev1.Pod)

func mkPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func replicas(n int, prefix, cpu, mem string, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, mkPod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem, opts...))
	}
	return out
}

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func mkNodePool(name string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			Requirements: reqs,
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
}

// guide03Pool is the NodePool of the guides' scale-up walkthrough.
func guide03Pool() *v1.NodePool {
	return mkNodePool("default",
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
		req(v1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
		req("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "2"),
	)
}

func solve(t testing.TB, pools []*v1.NodePool, pods []*corev1.Pod, mods ...func(*Snapshot)) *Plan {
	t.Helper()
	return solveWith(t, Options{}, pools, pods, mods...)
}

// solveWith plans pods on pools offering the whole catalog, with opts.
func solveWith(t testing.TB, opts Options, pools []*v1.NodePool, pods []*corev1.Pod, mods ...func(*Snapshot)) *Plan {
	t.Helper()
	snap := Snapshot{Pods: pods}
	for _, np := range pools {
		snap.NodePools = append(snap.NodePools, NodePool{NodePool: np, InstanceTypes: testCatalog(t)})
	}
	for _, m := range mods {
		m(&snap)
	}
	return Solve(snap, opts)
}

func summary(p *Plan) string {
	s := ""
	for _, nc := range p.NewNodeClaims {
		s += fmt.Sprintf("%s/%s/%s/%s pods=%d $%.4f options=%d\n", nc.NodePool, nc.InstanceType.Name, nc.Offering.CapacityType, nc.Offering.Zone, len(nc.Pods), nc.Price(), len(nc.InstanceTypes))
	}
	for _, u := range p.Unschedulable {
		s += fmt.Sprintf("unschedulable %s: %s\n", u.Pod.Name, u.Reason)
	}
	return s + fmt.Sprintf("total $%.4f", p.TotalPrice())
}
