package state

import (
	"context"
	"fmt"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pods are the cache's own pods, to read and never write.
func (c *Cluster) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	return cached[corev1.Pod](ctx, c, &corev1.PodList{})
}

// Nodes are the cache's own nodes, to read and never write.
func (c *Cluster) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	return cached[corev1.Node](ctx, c, &corev1.NodeList{})
}

// NodeClaims are the cache's own NodeClaims, to read and never write.
func (c *Cluster) NodeClaims(ctx context.Context) ([]*v1.NodeClaim, error) {
	return cached[v1.NodeClaim](ctx, c, &v1.NodeClaimList{})
}

// cached reads the informer's store in place, or without a cache lists
// into list without deep copies and points into its items.
func cached[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c *Cluster, list client.ObjectList) ([]PT, error) {
	if out, ok, err := inPlace[T, PT](ctx, c); ok || err != nil {
		return out, err
	}
	if err := c.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	return typed[PT](items)
}

// inPlace reads the informer's store, when c has the cache: a List, even
// without deep copies, copies every object's struct into its Items, 11 MB
// for 10,000 pods, and the provisioner, disruption and the metrics scrape
// each did it at once. ok is false without a cache, to List instead.
func inPlace[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c *Cluster) (out []PT, ok bool, err error) {
	if c.Cache == nil {
		return nil, false, nil
	}
	inf, err := c.Cache.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, true, err
	}
	store, isStore := inf.(interface{ GetStore() toolscache.Store })
	if !isStore {
		return nil, false, nil
	}
	out, err = typed[PT](store.GetStore().List())
	return out, true, err
}

// typed asserts each of items to PT.
func typed[PT any, E any](items []E) ([]PT, error) {
	out := make([]PT, 0, len(items))
	for _, o := range items {
		obj, ok := any(o).(PT)
		if !ok {
			return nil, fmt.Errorf("read a %T where a %T was asked for", o, obj)
		}
		out = append(out, obj)
	}
	return out, nil
}

// Pending are the pods that wait for a node Joiner could make: the
// cache's unschedulable pods, the pods of nodes being deleted (Moving),
// and, with the CapacityBuffer gate, the buffers' virtual pods.
func (c *Cluster) Pending(ctx context.Context) ([]*corev1.Pod, error) {
	all, err := c.Pods(ctx)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range all {
		if pods.IsProvisionable(p) {
			out = append(out, p)
		}
	}
	moves, err := c.moves(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, Moving(all, moves)...)
	if c.Buffers != nil {
		out = append(out, c.Buffers.All()...)
	}
	return out, nil
}

// DaemonSetPods are the pods the cluster's DaemonSets would run on a new
// node, as the API server would admit them (their namespaces'
// LimitRanges' defaults), so each new node keeps the room they will take.
func (c *Cluster) DaemonSetPods(ctx context.Context) ([]*corev1.Pod, error) {
	var daemonSets appsv1.DaemonSetList
	if err := c.Client.List(ctx, &daemonSets); err != nil {
		return nil, err
	}
	var ranges corev1.LimitRangeList
	if err := c.Client.List(ctx, &ranges); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(daemonSets.Items))
	for i := range daemonSets.Items {
		out[i] = pods.WithLimitRanges(pods.DaemonSetPod(&daemonSets.Items[i]), ranges.Items)
	}
	return out, nil
}
