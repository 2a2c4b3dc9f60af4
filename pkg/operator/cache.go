package operator

import (
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"

	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/volumes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// lastApplied is kubectl's copy of the whole object, often the largest
// annotation a pod carries.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// cacheTransform trims every object before the informers cache it, so the
// controller's memory follows what it reads rather than what the API
// server stores: managed fields go from every object, and from pods
// kubectl's last-applied copy, the parts of containers that only the
// kubelet uses (environment, commands, probes, mounts), the volumes that
// cannot bear on placement (the service account's projected token, config
// maps, secrets, emptyDirs: volumes.Constrains), the containers' limits and
// statuses and the conditions' messages; from nodes the images they hold.
// Joiner never writes a pod or node back, so nothing trimmed here can be
// lost; requests, ports, affinity, tolerations, claims, labels, phase and
// conditions stay.
//
// An object already trimmed is returned untouched, without a single write:
// a relist hands the informer the objects its cache holds (keepHeld), and
// those are shared with every reader of the cache.
func cacheTransform(in any) (any, error) {
	if trimmed(in) {
		return in, nil
	}
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	if pod, ok := in.(*corev1.Pod); ok {
		delete(pod.Annotations, lastApplied)
		for i := range pod.Spec.InitContainers {
			trimContainer(&pod.Spec.InitContainers[i])
		}
		for i := range pod.Spec.Containers {
			trimContainer(&pod.Spec.Containers[i])
		}
		pod.Spec.EphemeralContainers = nil
		// A new slice: filtering in place would keep the dropped volumes
		// alive behind the kept ones, in the same array.
		var kept []corev1.Volume
		for i := range pod.Spec.Volumes {
			if volumes.Constrains(&pod.Spec.Volumes[i]) {
				kept = append(kept, pod.Spec.Volumes[i])
			}
		}
		pod.Spec.Volumes = slices.Clip(kept)
		pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses = nil, nil, nil
		// kube-scheduler writes why a pending pod did not fit into its
		// PodScheduled condition, a few hundred bytes per pending pod that
		// nothing here reads.
		for i := range pod.Status.Conditions {
			pod.Status.Conditions[i].Message = ""
		}
	}
	if node, ok := in.(*corev1.Node); ok {
		// The images a node has pulled, kube-scheduler's image locality:
		// tens of entries on a busy node, and nothing here reads them.
		node.Status.Images = nil
	}
	return in, nil
}

// trimmed tells, by reads alone, an object cacheTransform would leave as
// it is. It checks every field cacheTransform clears.
func trimmed(in any) bool {
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		return false
	}
	if pod, ok := in.(*corev1.Pod); ok {
		if _, ok := pod.Annotations[lastApplied]; ok {
			return false
		}
		if slices.ContainsFunc(pod.Spec.InitContainers, untrimmedContainer) || slices.ContainsFunc(pod.Spec.Containers, untrimmedContainer) {
			return false
		}
		if pod.Spec.EphemeralContainers != nil || pod.Status.ContainerStatuses != nil || pod.Status.InitContainerStatuses != nil || pod.Status.EphemeralContainerStatuses != nil {
			return false
		}
		for i := range pod.Spec.Volumes {
			if !volumes.Constrains(&pod.Spec.Volumes[i]) {
				return false
			}
		}
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Message != "" {
				return false
			}
		}
	}
	if node, ok := in.(*corev1.Node); ok && node.Status.Images != nil {
		return false
	}
	return true
}

func untrimmedContainer(c corev1.Container) bool {
	return c.Command != nil || c.Args != nil || c.WorkingDir != "" || c.Env != nil || c.EnvFrom != nil ||
		c.VolumeMounts != nil || c.VolumeDevices != nil || c.LivenessProbe != nil || c.ReadinessProbe != nil ||
		c.StartupProbe != nil || c.Lifecycle != nil || c.TerminationMessagePath != "" || c.Resources.Limits != nil
}

func trimContainer(c *corev1.Container) {
	c.Command, c.Args, c.WorkingDir = nil, nil, ""
	c.Env, c.EnvFrom = nil, nil
	c.VolumeMounts, c.VolumeDevices = nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	c.TerminationMessagePath = ""
	// Requests are what placement counts (the API server copies limits
	// into requests left unset); limits only bound the container at run time.
	c.Resources.Limits = nil
}

// metricsOptions serves /metrics, the disruption controller's word on
// each node (explain.Path, for `joiner explain`), and with
// ENABLE_PROFILING Go's pprof profiles under /debug/pprof/ on the same
// port, as Karpenter does.
func metricsOptions(opts *Options, board *explain.Board) metricsserver.Options {
	m := metricsserver.Options{BindAddress: ":" + strconv.Itoa(opts.MetricsPort),
		ExtraHandlers: map[string]http.Handler{explain.Path: board, explain.PodsPath: board}}
	if opts.EnableProfiling {
		for path, h := range map[string]http.HandlerFunc{
			"/debug/pprof/":        pprof.Index,
			"/debug/pprof/cmdline": pprof.Cmdline,
			"/debug/pprof/profile": pprof.Profile,
			"/debug/pprof/symbol":  pprof.Symbol,
			"/debug/pprof/trace":   pprof.Trace,
		} {
			m.ExtraHandlers[path] = h
		}
	}
	return m
}
