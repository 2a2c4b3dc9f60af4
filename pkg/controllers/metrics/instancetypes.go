package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

var (
	typeCPU = newFamily("karpenter_cloudprovider_instance_type_cpu_cores",
		"vCPUs of each instance type the NodePools can launch.", "instance_type")
	typeMemory = newFamily("karpenter_cloudprovider_instance_type_memory_bytes",
		"Memory of each instance type the NodePools can launch, in bytes.", "instance_type")
	offeringAvailable = newFamily("karpenter_cloudprovider_instance_type_offering_available",
		"1 when the offering (type, capacity type, zone) can be launched now, 0 when it is out (capacity errors, a full reservation).",
		"instance_type", "capacity_type", "zone")
	offeringPrice = newFamily("karpenter_cloudprovider_instance_type_offering_price_estimate",
		"The price Joiner plans with for the offering, in $/h.", "instance_type", "capacity_type", "zone")
)

// InstanceTypes is the scrape-time collector of the offering gauges: the
// instance types of every NodePool, as the provider lists them (from its
// caches), each type and offering once.
type InstanceTypes struct {
	Reader   client.Reader
	Provider cloudprovider.CloudProvider
	// Timeout bounds one scrape; 10s when zero.
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (c *InstanceTypes) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range []*family{typeCPU, typeMemory, offeringAvailable, offeringPrice} {
		ch <- f.desc
	}
}

// Collect implements prometheus.Collector.
func (c *InstanceTypes) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext(c.Timeout, 10*time.Second)
	defer cancel()
	var pools v1.NodePoolList
	if c.Reader.List(ctx, &pools) != nil {
		return
	}
	lp := pairs{}
	types := map[string]bool{}
	offerings := map[[3]string]bool{}
	for i := range pools.Items {
		its, err := c.Provider.InstanceTypes(ctx, &pools.Items[i])
		if err != nil {
			continue
		}
		for _, it := range its {
			if !types[it.Name] {
				types[it.Name] = true
				cpu, mem := it.Capacity[corev1.ResourceCPU], it.Capacity[corev1.ResourceMemory]
				ch <- typeCPU.series(lp, cpu.AsApproximateFloat64(), it.Name)
				ch <- typeMemory.series(lp, mem.AsApproximateFloat64(), it.Name)
			}
			for _, o := range it.Offerings {
				key := [3]string{it.Name, o.CapacityType, o.Zone}
				if offerings[key] {
					continue
				}
				offerings[key] = true
				available := 0.0
				if o.Available {
					available = 1
				}
				ch <- offeringAvailable.series(lp, available, key[:]...)
				ch <- offeringPrice.series(lp, o.Price, key[:]...)
			}
		}
	}
}
