package record

import (
	"context"
	"fmt"
	"strings"
	"time"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncTimeout bounds the wait for the first listing, so that a missing
// permission is reported at once rather than when --for ends.
const syncTimeout = time.Minute

// watched is one kind Watch follows: what its adds and updates record
// (initial: the object was there at the start), and its deletions.
type watched struct {
	obj  client.Object
	add  func(obj any, initial bool)
	gone func(obj client.Object)
}

// Watch records a live cluster from now until ctx ends: the Deployments,
// StatefulSets, Jobs, bare Pods, NodePools, EC2NodeClasses, DaemonSets,
// PodDisruptionBudgets and storage (claims, volumes, classes) there at the
// start are the run's manifests, and the nodes a NodePool manages its
// first nodes (startNode), and what changes after is the trace
// (Deployments' and StatefulSets' replicas, their roll-outs and deletions; Jobs;
// bare Pods created and deleted; NodePools, EC2NodeClasses, DaemonSets and
// PodDisruptionBudgets created or changed, and all but EC2NodeClasses
// deleted). ready is called once the start is recorded. Timestamps are clk's.
func Watch(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, clk clock.PassiveClock, ready func()) (*Recording, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	rec := New(clk.Now())
	kinds := []watched{
		{&appsv1.Deployment{}, func(obj any, initial bool) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				rec.Deployment(clk.Now(), d, !initial)
			}
		}, func(obj client.Object) { rec.WorkloadGone(clk.Now(), "Deployment", obj.GetNamespace(), obj.GetName()) }},
		{&appsv1.StatefulSet{}, func(obj any, initial bool) {
			if sts, ok := obj.(*appsv1.StatefulSet); ok {
				rec.StatefulSet(clk.Now(), sts, !initial)
			}
		}, func(obj client.Object) { rec.WorkloadGone(clk.Now(), "StatefulSet", obj.GetNamespace(), obj.GetName()) }},
		{&corev1.Pod{}, func(obj any, initial bool) {
			// Only bare Pods: a controller's pods are its workload's.
			p, ok := obj.(*corev1.Pod)
			switch {
			case !ok || metav1.GetControllerOf(p) != nil || pods.IsOwnedByNode(p):
			case pods.IsTerminal(p) || p.DeletionTimestamp != nil:
				// Finished or going: gone from the run's point of view.
				rec.PodGone(clk.Now(), p.Namespace, p.Name)
			default:
				rec.Pod(clk.Now(), p, !initial)
			}
		}, func(obj client.Object) { rec.PodGone(clk.Now(), obj.GetNamespace(), obj.GetName()) }},
		{&corev1.PersistentVolumeClaim{}, func(obj any, initial bool) {
			if c, ok := obj.(*corev1.PersistentVolumeClaim); ok && initial {
				cp := &corev1.PersistentVolumeClaim{ObjectMeta: clean(c.ObjectMeta), Spec: *c.Spec.DeepCopy(), Status: corev1.PersistentVolumeClaimStatus{Phase: c.Status.Phase}}
				cp.APIVersion, cp.Kind = "v1", "PersistentVolumeClaim"
				rec.Object("PersistentVolumeClaim", c.Namespace, c.Name, cp)
			}
		}, nil},
		{&corev1.PersistentVolume{}, func(obj any, initial bool) {
			if pv, ok := obj.(*corev1.PersistentVolume); ok && initial {
				cp := &corev1.PersistentVolume{ObjectMeta: clean(pv.ObjectMeta), Spec: *pv.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "v1", "PersistentVolume"
				rec.Object("PersistentVolume", "", pv.Name, cp)
			}
		}, nil},
		{&storagev1.StorageClass{}, func(obj any, initial bool) {
			if sc, ok := obj.(*storagev1.StorageClass); ok && initial {
				cp := sc.DeepCopy()
				cp.ObjectMeta = clean(sc.ObjectMeta)
				cp.APIVersion, cp.Kind = "storage.k8s.io/v1", "StorageClass"
				rec.Object("StorageClass", "", sc.Name, cp)
			}
		}, nil},
		{&batchv1.Job{}, func(obj any, _ bool) {
			// Job leaves out those that finished before the start.
			if j, ok := obj.(*batchv1.Job); ok {
				rec.Job(clk.Now(), j)
			}
		}, func(obj client.Object) { rec.JobGone(clk.Now(), obj.GetNamespace(), obj.GetName()) }},
		{&v1.NodePool{}, func(obj any, initial bool) {
			if np, ok := obj.(*v1.NodePool); ok {
				rec.NodePool(clk.Now(), np, !initial)
			}
		}, func(obj client.Object) { rec.NodePoolGone(clk.Now(), obj.GetName()) }},
		{&appsv1.DaemonSet{}, func(obj any, initial bool) {
			if ds, ok := obj.(*appsv1.DaemonSet); ok {
				cp := &appsv1.DaemonSet{ObjectMeta: clean(ds.ObjectMeta), Spec: *ds.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "apps/v1", "DaemonSet"
				cp.Spec.Template.ObjectMeta = clean(cp.Spec.Template.ObjectMeta)
				rec.Tracked(clk.Now(), "DaemonSet", ds.Namespace, ds.Name, cp, cp.Spec, !initial)
			}
		}, func(obj client.Object) { rec.Untracked(clk.Now(), "DaemonSet", obj.GetNamespace(), obj.GetName()) }},
		{&policyv1.PodDisruptionBudget{}, func(obj any, initial bool) {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				cp := &policyv1.PodDisruptionBudget{ObjectMeta: clean(pdb.ObjectMeta), Spec: *pdb.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "policy/v1", "PodDisruptionBudget"
				rec.Tracked(clk.Now(), "PodDisruptionBudget", pdb.Namespace, pdb.Name, cp, cp.Spec, !initial)
			}
		}, func(obj client.Object) {
			rec.Untracked(clk.Now(), "PodDisruptionBudget", obj.GetNamespace(), obj.GetName())
		}},
		{&corev1.Node{}, func(obj any, initial bool) {
			if n, ok := obj.(*corev1.Node); ok && initial {
				if cp := startNode(n); cp != nil {
					rec.Object("Node", "", n.Name, cp)
				}
			}
		}, nil},
		{&awsv1.EC2NodeClass{}, func(obj any, initial bool) {
			if nc, ok := obj.(*awsv1.EC2NodeClass); ok {
				cp := &awsv1.EC2NodeClass{ObjectMeta: clean(nc.ObjectMeta), Spec: *nc.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "karpenter.k8s.aws/v1", "EC2NodeClass"
				rec.Tracked(clk.Now(), "EC2NodeClass", "", nc.Name, cp, cp.Spec, !initial)
			}
		}, nil},
	}
	for _, k := range kinds {
		inf, err := c.GetInformer(ctx, k.obj)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", k.obj, err)
		}
		add, gone := k.add, k.gone
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    add,
			UpdateFunc: func(_, obj any) { add(obj, false) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if o, ok := obj.(client.Object); ok && gone != nil {
					gone(o)
				}
			},
		}); err != nil {
			return nil, err
		}
	}
	errs := make(chan error, 1)
	go func() { errs <- c.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		why := "is the API server reachable, and may this user list and watch deployments, statefulsets, jobs, pods, daemonsets, poddisruptionbudgets, persistentvolumeclaims, persistentvolumes, storageclasses, nodes, nodepools and ec2nodeclasses?"
		select {
		case err := <-errs:
			if err != nil {
				return nil, fmt.Errorf("watching the cluster: %w; %s", err, why)
			}
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped before the cluster was listed")
		}
		return nil, fmt.Errorf("watching the cluster: nothing listed within %s; %s", syncTimeout, why)
	}
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	return rec, nil
}

// startNode is a node a NodePool manages, as a run starts from it: its
// name, labels and the taints its NodePool or its owner gave it; nil for
// a node no NodePool manages, or one already going. The taints the
// kubelet, the node controllers and disruption add come and go with the
// node's state, not its configuration, and are left out.
func startNode(n *corev1.Node) *corev1.Node {
	if n.Labels[v1.LabelNodePool] == "" || n.DeletionTimestamp != nil {
		return nil
	}
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
	cp.APIVersion, cp.Kind = "v1", "Node"
	for _, t := range n.Spec.Taints {
		if t.Key == v1.DisruptedNoScheduleTaint.Key || strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/") {
			continue
		}
		cp.Spec.Taints = append(cp.Spec.Taints, t)
	}
	return cp
}
