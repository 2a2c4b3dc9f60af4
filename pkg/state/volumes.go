package state

import (
	"context"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// clusterVolumes is what planning needs to know of storage: the objects
// pods' volumes resolve against, and the attach limits nodes report.
type clusterVolumes struct {
	index *volumes.Index
	// csiLimits are the CSINodes' allocatable counts, by node and driver.
	csiLimits map[string]map[string]int
}

func (c *Cluster) readVolumes(ctx context.Context) (*clusterVolumes, error) {
	var claims corev1.PersistentVolumeClaimList
	if err := c.Client.List(ctx, &claims); err != nil {
		return nil, err
	}
	var pvs corev1.PersistentVolumeList
	if err := c.Client.List(ctx, &pvs); err != nil {
		return nil, err
	}
	var classes storagev1.StorageClassList
	if err := c.Client.List(ctx, &classes); err != nil {
		return nil, err
	}
	var csiNodes storagev1.CSINodeList
	if err := c.Client.List(ctx, &csiNodes); err != nil {
		return nil, err
	}
	cv := &clusterVolumes{csiLimits: map[string]map[string]int{}}
	cv.index = volumes.NewIndex(pointers(claims.Items), pointers(pvs.Items), pointers(classes.Items))
	for i := range csiNodes.Items {
		cn := &csiNodes.Items[i]
		for _, d := range cn.Spec.Drivers {
			if d.Allocatable == nil || d.Allocatable.Count == nil {
				continue
			}
			if cv.csiLimits[cn.Name] == nil {
				cv.csiLimits[cn.Name] = map[string]int{}
			}
			cv.csiLimits[cn.Name][d.Name] = int(*d.Allocatable.Count)
		}
	}
	return cv, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// nodeAttachLimits are a node's attach limits: its CSINode's counts, and
// for drivers that have not registered yet (a node just started) its
// instance type's.
func (cv *clusterVolumes) nodeAttachLimits(n *corev1.Node, types map[string]*cloudprovider.InstanceType) map[string]int {
	out := map[string]int{}
	if it, ok := types[n.Labels[corev1.LabelInstanceTypeStable]]; ok {
		for d, l := range it.AttachLimits {
			out[d] = l
		}
	}
	for d, l := range cv.csiLimits[n.Name] {
		out[d] = l
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// claimAttachLimits are an in-flight NodeClaim's attach limits: the least
// among its instance-type options, since any of them may launch.
func claimAttachLimits(nc *v1.NodeClaim, types []*cloudprovider.InstanceType) map[string]int {
	allowed := map[string]bool{}
	if launched, ok := nc.Labels[corev1.LabelInstanceTypeStable]; ok {
		allowed[launched] = true
	}
	for _, r := range nc.Spec.Requirements {
		if len(allowed) == 0 && r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			for _, v := range r.Values {
				allowed[v] = true
			}
		}
	}
	var out map[string]int
	for _, it := range types {
		if !allowed[it.Name] {
			continue
		}
		if out == nil {
			out = map[string]int{}
			for d, l := range it.AttachLimits {
				out[d] = l
			}
			continue
		}
		for d, l := range it.AttachLimits {
			if cur, ok := out[d]; !ok || l < cur {
				out[d] = l
			}
		}
	}
	return out
}
