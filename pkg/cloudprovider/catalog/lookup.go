package catalog

import (
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Record is the catalog's own data for one instance type, priced or not:
// the AWS provider reads from it what EC2's DescribeInstanceTypes does not
// say (branch interfaces for pods with security groups, the network
// bandwidth table), and tests compare against it.
type Record struct {
	Name string
	// Labels are the well-known labels of a node of the type (no region or zone).
	Labels map[string]string
	// Allocatable is what pods can use on a node of the type under the
	// defaults (AL2023, no kubelet overrides, a 20Gi root volume, 7.5% VM
	// memory overhead, no reserved ENIs).
	Allocatable corev1.ResourceList
}

var (
	recordsOnce   sync.Once
	recordsByName map[string]Record
	recordNames   []string
	recordsErr    error
)

func records() (map[string]Record, error) {
	es, err := entries()
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	recordsOnce.Do(func() {
		recordsByName = make(map[string]Record, len(es))
		for _, e := range es {
			alloc := corev1.ResourceList{}
			for k, v := range e.Allocatable {
				q, err := resource.ParseQuantity(v)
				if err != nil {
					recordsErr = fmt.Errorf("embedded catalog, %s: allocatable %s: %w", e.Name, k, err)
					return
				}
				alloc[corev1.ResourceName(k)] = q
			}
			recordsByName[e.Name] = Record{Name: e.Name, Labels: e.Labels, Allocatable: alloc}
			recordNames = append(recordNames, e.Name)
		}
		sort.Strings(recordNames)
	})
	return recordsByName, recordsErr
}

// Lookup returns the catalog's record of an instance type. The maps are
// shared: callers must not modify them.
func Lookup(name string) (Record, bool) {
	rs, err := records()
	if err != nil {
		return Record{}, false
	}
	r, ok := rs[name]
	return r, ok
}

// Names lists every instance type in the catalog, priced or not, sorted.
func Names() ([]string, error) {
	if _, err := records(); err != nil {
		return nil, err
	}
	return append([]string(nil), recordNames...), nil
}

// OnDemandPrices is the modelled on-demand price ($/h) of every priced type
// in region, the same prices InstanceTypes offers.
func OnDemandPrices(region string) (map[string]float64, error) {
	es, err := entries()
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	factor, ok := regionFactors[region]
	if !ok {
		factor = UnknownRegionFactor
	}
	out := make(map[string]float64, len(es))
	for _, e := range es {
		if base, ok := e.OnDemand[DefaultRegion]; ok && base > 0 {
			out[e.Name] = round4(base * factor)
		}
	}
	return out, nil
}

// AttachLimits are the volume attach limits per CSI driver of a new node
// whose instance-type labels are labels (see volumes.go).
func AttachLimits(labels map[string]string) map[string]int { return attachLimits(labels) }
