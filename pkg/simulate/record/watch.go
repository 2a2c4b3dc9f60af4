package record

import (
	"context"
	"fmt"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watch records a live cluster from now until ctx ends: the Deployments,
// Jobs, NodePools, EC2NodeClasses, DaemonSets and PodDisruptionBudgets
// there at the start are the run's manifests, and what changes after (of
// the first three) is the trace. ready is called once
// the start is recorded. Timestamps are clk's.
func Watch(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, clk clock.PassiveClock, ready func()) (*Recording, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	rec := New(clk.Now())
	handlers := []struct {
		obj client.Object
		add func(obj any, initial bool)
	}{
		{&appsv1.Deployment{}, func(obj any, initial bool) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				rec.Deployment(clk.Now(), d, !initial)
			}
		}},
		{&batchv1.Job{}, func(obj any, initial bool) {
			// A Job that finished before the start ran outside the trace.
			if j, ok := obj.(*batchv1.Job); ok && !(initial && finished(j)) {
				rec.Job(clk.Now(), j)
			}
		}},
		{&v1.NodePool{}, func(obj any, _ bool) {
			if np, ok := obj.(*v1.NodePool); ok {
				rec.NodePool(clk.Now(), np)
			}
		}},
		{&appsv1.DaemonSet{}, func(obj any, _ bool) {
			if ds, ok := obj.(*appsv1.DaemonSet); ok {
				cp := &appsv1.DaemonSet{ObjectMeta: clean(ds.ObjectMeta), Spec: *ds.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "apps/v1", "DaemonSet"
				cp.Spec.Template.ObjectMeta = clean(cp.Spec.Template.ObjectMeta)
				rec.Object("DaemonSet", ds.Namespace, ds.Name, cp)
			}
		}},
		{&policyv1.PodDisruptionBudget{}, func(obj any, _ bool) {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				cp := &policyv1.PodDisruptionBudget{ObjectMeta: clean(pdb.ObjectMeta), Spec: *pdb.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "policy/v1", "PodDisruptionBudget"
				rec.Object("PodDisruptionBudget", pdb.Namespace, pdb.Name, cp)
			}
		}},
		{&awsv1.EC2NodeClass{}, func(obj any, _ bool) {
			if nc, ok := obj.(*awsv1.EC2NodeClass); ok {
				cp := &awsv1.EC2NodeClass{ObjectMeta: clean(nc.ObjectMeta), Spec: *nc.Spec.DeepCopy()}
				cp.APIVersion, cp.Kind = "karpenter.k8s.aws/v1", "EC2NodeClass"
				rec.Object("EC2NodeClass", "", nc.Name, cp)
			}
		}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", h.obj, err)
		}
		add := h.add
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    add,
			UpdateFunc: func(_, obj any) { add(obj, false) },
		}); err != nil {
			return nil, err
		}
	}
	errs := make(chan error, 1)
	go func() { errs <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		select {
		case err := <-errs:
			return nil, fmt.Errorf("watching the cluster: %w", err)
		default:
			return nil, fmt.Errorf("watching the cluster: the caches did not sync; is the API server reachable, and may this user list and watch deployments, jobs, daemonsets, poddisruptionbudgets, nodepools and ec2nodeclasses?")
		}
	}
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	return rec, nil
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}
