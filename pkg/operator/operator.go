package operator

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"time"

	autoscalingv1beta1 "github.com/joiner-autoscaler/joiner/api/autoscaling/v1beta1"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/buffers"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/capacitybuffer"
	disruptionctrl "github.com/joiner-autoscaler/joiner/pkg/controllers/disruption"
	clustermetrics "github.com/joiner-autoscaler/joiner/pkg/controllers/metrics"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/repair"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/node/termination"
	ncdisruption "github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/disruption"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/expiration"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/lifecycle"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclaim/podevents"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeoverlay"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodepool/static"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodepool/status"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/provisioning"
	"github.com/joiner-autoscaler/joiner/pkg/events"
	"github.com/joiner-autoscaler/joiner/pkg/explain"
	"github.com/joiner-autoscaler/joiner/pkg/overlay"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Scheme knows core Kubernetes types and Joiner's APIs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	_ = awsv1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	_ = autoscalingv1beta1.AddToScheme(s)
	return s
}

// Run starts the controller manager and blocks until ctx ends.
func Run(ctx context.Context, opts *Options) error {
	logger, err := NewLogger(opts.LogLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	ctx = log.IntoContext(ctx, logger)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster: %w (set KUBECONFIG or run in a pod)", err)
	}
	if opts.CPURequests > 0 && os.Getenv("GOMAXPROCS") == "" {
		goruntime.GOMAXPROCS((opts.CPURequests + 999) / 1000)
	}
	if err := checkServerVersion(cfg, opts.KubernetesMinVersion); err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(opts.KubeClientQPS), opts.KubeClientBurst
	cfg.UserAgent = "joiner"
	ns := opts.LeaderElectionNS
	if ns == "" {
		ns = os.Getenv("SYSTEM_NAMESPACE")
	}
	if ns == "" {
		ns = "kube-system"
	}
	clk := clock.RealClock{}
	board := &explain.Board{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Logger:                        logger,
		Metrics:                       metricsOptions(opts, board),
		Cache:                         CacheOptions(),
		HealthProbeBindAddress:        ":" + strconv.Itoa(opts.HealthProbePort),
		LeaderElection:                !opts.DisableLeaderElection,
		LeaderElectionID:              opts.LeaderElectionName,
		LeaderElectionNamespace:       ns,
		LeaderElectionResourceLock:    "leases",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if err := indexFields(ctx, mgr); err != nil {
		return err
	}
	// One recorder, deduplicating, for every controller.
	recorder := events.Deduped(mgr.GetEventRecorderFor("karpenter"), clk)
	// With the NodeOverlay gate, every reader of instance types sees them
	// through the overlays the nodeoverlay controller last evaluated, and
	// the provider launches from the same view.
	var overlays *overlay.Store
	var typeOverlay cloudprovider.TypeOverlay
	if opts.FeatureGates.NodeOverlay {
		overlays = &overlay.Store{}
		typeOverlay = overlays.ApplyToNamed
	}
	provider, err := newCloudProvider(ctx, mgr, cfg, opts, clk, recorder, typeOverlay)
	if err != nil {
		return err
	}
	provider = cloudprovider.Instrumented(provider, clk)
	if overlays != nil {
		if err := (&nodeoverlay.Controller{Client: mgr.GetClient(), CloudProvider: provider, Store: overlays, Clock: clk}).Register(mgr); err != nil {
			return err
		}
		provider = overlay.Decorate(provider, overlays)
	}
	if err := crmetrics.Registry.Register(&clustermetrics.InstanceTypes{Reader: mgr.GetClient(), Provider: provider}); err != nil {
		return err
	}
	sched := opts.Scheduling()
	batcher := provisioning.NewBatcher(clk, opts.BatchIdleDuration, opts.BatchMaxDuration)
	resync := 10 * time.Second
	nominations := &state.Nominations{Clock: clk, Window: state.NominationWindow(opts.BatchMaxDuration, resync)}
	// One view of the cluster for provisioning and disruption. It counts
	// the NodeClaims the provisioner created that the cache has not held
	// yet, until the NodeClaim informer reports them.
	cluster := &state.Cluster{Client: mgr.GetClient(), Cache: mgr.GetCache(), CloudProvider: provider, Clock: clk, Nominations: nominations,
		StaticCapacity: opts.FeatureGates.StaticCapacity}
	// With the CapacityBuffer gate, the buffers' virtual pods are pending
	// in every plan, provisioning's and disruption's.
	var bufferStatus *capacitybuffer.Controller
	if opts.FeatureGates.CapacityBuffer {
		cluster.Buffers = &buffers.Store{}
		bufferStatus = &capacitybuffer.Controller{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Store: cluster.Buffers, Clock: clk, Trigger: batcher.Trigger}
		if err := bufferStatus.Register(mgr); err != nil {
			return err
		}
	}
	claims, err := mgr.GetCache().GetInformer(ctx, &v1.NodeClaim{})
	if err != nil {
		return err
	}
	if _, err := claims.AddEventHandler(cluster.Seen()); err != nil {
		return err
	}
	// The provisioner creates NodeClaims on a client of its own: client-go
	// limits requests per client and resource, and on the manager's client
	// a batch's creates waited behind the lifecycle's thousand workers
	// writing the NodeClaims the batch had just created (1,106 creates took
	// 34–49 s; docs/benchmarks.md §7). Its budget is KUBE_CLIENT_QPS too.
	creates, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return err
	}
	prov := &provisioning.Provisioner{Client: creates, Cluster: cluster, Board: board,
		Batcher: batcher, Recorder: recorder, Clock: clk, Resync: resync, Nominations: nominations, Scheduling: sched}
	if bufferStatus != nil {
		prov.Buffers = bufferStatus
	}
	if err := mgr.Add(prov); err != nil {
		return err
	}
	if err := podTrigger(mgr, batcher); err != nil {
		return err
	}
	if err := (&lifecycle.Controller{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), CloudProvider: provider, Recorder: recorder, Clock: clk,
		LaunchTTL: opts.LaunchTTL, RegistrationTTL: opts.RegistrationTTL}).Register(mgr); err != nil {
		return err
	}
	if err := (&termination.Controller{Client: mgr.GetClient(), CloudProvider: provider, Recorder: recorder, Clock: clk, MinDrain: termination.MinDrainTime}).Register(mgr); err != nil {
		return err
	}
	if err := (&status.Controller{Client: mgr.GetClient(), Cluster: cluster, Clock: clk}).Register(mgr); err != nil {
		return err
	}
	if err := (&ncdisruption.Controller{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), CloudProvider: provider, Clock: clk}).Register(mgr); err != nil {
		return err
	}
	if err := (&expiration.Controller{Client: mgr.GetClient(), Clock: clk}).Register(mgr); err != nil {
		return err
	}
	if err := (&podevents.Controller{Client: mgr.GetClient(), Clock: clk}).Register(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&disruptionctrl.Controller{Client: mgr.GetClient(), Cluster: cluster,
		CloudProvider: provider, Recorder: recorder, Clock: clk, Poll: opts.DisruptionPoll, SpotToSpot: opts.FeatureGates.SpotToSpotConsolidation,
		ReadyTimeout: 10 * time.Minute, ValidationDelay: 15 * time.Second, Nominations: nominations, Scheduling: sched, Board: board}); err != nil {
		return err
	}
	if opts.FeatureGates.StaticCapacity {
		if err := (&static.Controller{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cluster: cluster, CloudProvider: provider,
			Clock: clk, Scheduling: sched}).Register(mgr); err != nil {
			return err
		}
	}
	if opts.FeatureGates.NodeRepair {
		policies := repair.EKSPolicies
		if opts.RepairToleration > 0 {
			policies = nil
			for _, p := range repair.EKSPolicies {
				p.Toleration = opts.RepairToleration
				policies = append(policies, p)
			}
		}
		if err := (&repair.Controller{Client: mgr.GetClient(), Recorder: recorder, Clock: clk, Policies: policies}).Register(mgr); err != nil {
			return err
		}
	}
	if err := mgr.Add(&garbagecollection.Controller{Cluster: cluster, Client: mgr.GetClient(), CloudProvider: provider, Clock: clk,
		Interval: opts.GarbageCollectInterval, MinAge: opts.GarbageCollectMinAge}); err != nil {
		return err
	}
	if !opts.DisableClusterStateObservability {
		if err := crmetrics.Registry.Register(&clustermetrics.State{Reader: mgr.GetClient(), Cluster: cluster, Provider: provider}); err != nil {
			return err
		}
		if err := mgr.Add(&clustermetrics.Pods{Cache: mgr.GetCache(), Reader: mgr.GetClient(), Clock: clk}); err != nil {
			return err
		}
	}
	logger.Info("starting joiner", "cloud-provider", opts.CloudProvider, "batch-idle-duration", opts.BatchIdleDuration.String(), "batch-max-duration", opts.BatchMaxDuration.String(),
		"preference-policy", string(sched.PreferencePolicy), "min-values-policy", string(sched.MinValuesPolicy), "node-repair", opts.FeatureGates.NodeRepair, "node-overlay", opts.FeatureGates.NodeOverlay, "static-capacity", opts.FeatureGates.StaticCapacity, "capacity-buffer", opts.FeatureGates.CapacityBuffer)
	return mgr.Start(ctx)
}

func indexFields(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Node{}, lifecycle.ProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Node).Spec.ProviderID}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.NodeClaim{}, lifecycle.ProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Status.ProviderID}
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &corev1.Pod{}, termination.NodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
}

// podTrigger starts a provisioning batch whenever a pod event shows a
// provisionable pod.
func podTrigger(mgr ctrl.Manager, b *provisioning.Batcher) error {
	trigger := &provisioning.PodTrigger{Batcher: b}
	return mgr.Add(&podWatch{mgr: mgr, trigger: trigger})
}

type podWatch struct {
	mgr     ctrl.Manager
	trigger *provisioning.PodTrigger
}

func (w *podWatch) Start(ctx context.Context) error {
	h := handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.Pod], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w.trigger.Observe(e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.Pod], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w.trigger.Observe(e.ObjectNew)
		},
	}
	src := source.Kind(w.mgr.GetCache(), &corev1.Pod{}, h, predicate.TypedFuncs[*corev1.Pod]{})
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		return err
	}
	// A new or changed NodePool may take pods that no NodePool could before.
	poolEvents := handler.TypedFuncs[*v1.NodePool, reconcile.Request]{
		CreateFunc: func(context.Context, event.TypedCreateEvent[*v1.NodePool], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			w.trigger.Batcher.Trigger()
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.NodePool], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.Generation != e.ObjectNew.Generation {
				w.trigger.Batcher.Trigger()
			}
		},
	}
	if err := source.Kind(w.mgr.GetCache(), &v1.NodePool{}, poolEvents, predicate.TypedFuncs[*v1.NodePool]{}).Start(ctx, q); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// checkServerVersion refuses an API server older than min (unset: any).
func checkServerVersion(cfg *rest.Config, min string) error {
	if min == "" {
		return nil
	}
	want, err := version.ParseGeneric(min)
	if err != nil {
		return fmt.Errorf("invalid setting KUBERNETES_MIN_VERSION %q: %w", min, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	info, err := disc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version for KUBERNETES_MIN_VERSION: %w", err)
	}
	have, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return fmt.Errorf("the API server's version %q: %w", info.GitVersion, err)
	}
	if have.LessThan(want) {
		return fmt.Errorf("the API server is %s, older than KUBERNETES_MIN_VERSION %s; upgrade the cluster or lower the setting", info.GitVersion, min)
	}
	return nil
}
