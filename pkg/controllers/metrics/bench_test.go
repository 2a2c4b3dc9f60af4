package metrics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	clustermetrics "github.com/joiner-autoscaler/joiner/pkg/controllers/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/state"
)

// listed serves Lists from objects in memory, as the informer cache would,
// so that a benchmark measures the scrape and not a fake client's copies.
type listed struct {
	client.Client
	nodes []corev1.Node
	pods  []corev1.Pod
	pools []v1.NodePool
}

func (l *listed) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch list := list.(type) {
	case *corev1.NodeList:
		list.Items = l.nodes
	case *corev1.PodList:
		list.Items = l.pods
	case *v1.NodePoolList:
		list.Items = l.pools
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

// BenchmarkStateScrape gathers the cluster-state gauges of the scale
// benchmark's cluster (docs/benchmarks.md §7): 10,000 pods on 1,600 nodes
// of three NodePools, as Prometheus scrapes them.
func BenchmarkStateScrape(b *testing.B) {
	l := &listed{}
	for _, name := range []string{"general", "spot", "batch"} {
		l.pools = append(l.pools, v1.NodePool{})
		l.pools[len(l.pools)-1].Name = name
	}
	zones := []string{"us-west-2a", "us-west-2b", "us-west-2c"}
	for i := range 1600 {
		n := node(fmt.Sprintf("node-%d", i), l.pools[i%3].Name, "8")
		n.Labels[corev1.LabelTopologyZone] = zones[i%3]
		n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("58")
		n.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("17Gi")
		l.nodes = append(l.nodes, *n)
	}
	for i := range 10000 {
		p := pod(fmt.Sprintf("app-%02d-%d", i%50, i), l.nodes[i%1600].Name, "500m", false, corev1.PodRunning)
		p.OwnerReferences[0].Name = fmt.Sprintf("app-%02d", i%50)
		l.pods = append(l.pods, *p)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&clustermetrics.State{Reader: l, Cluster: &state.Cluster{Client: l}})
	b.ReportAllocs()
	for b.Loop() {
		families, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		if len(families) != 5 {
			b.Fatalf("%d families", len(families))
		}
	}
}
