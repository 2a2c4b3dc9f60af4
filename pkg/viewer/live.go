package viewer

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/aws/smithy-go/logging"
	"github.com/go-logr/logr/funcr"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/commitments"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/commitment"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Config is what Run needs.
type Config struct {
	Rest    *rest.Config
	Scheme  *runtime.Scheme
	Options Options
	Style   Style
	// Prices; nil builds the default: kwok from the catalog, aws from the
	// AWS pricing provider when credentials are found.
	Prices *Prices
	Clock  clock.WithTicker
	// In and Out are the terminal; nil for the process's.
	In  io.Reader
	Out io.Writer
}

// refresh limits: changes are gathered for debounce before a rebuild, and
// the screen is rebuilt every resync anyway so ages, expiry and prices move.
const (
	debounce = 200 * time.Millisecond
	resync   = 5 * time.Second
)

// Run shows the viewer until the user quits or ctx ends. The cluster is
// watched through a controller-runtime cache (one informer per kind), so
// the screen follows every change without polling the API server.
func Run(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Prices == nil {
		cfg.Prices = &Prices{AWS: NewAWSPrices(ctx, cfg.Clock), Commitments: NewAWSCommitments(ctx, cfg.Clock)}
	}
	c, err := cache.New(cfg.Rest, cache.Options{Scheme: cfg.Scheme, ByObject: map[client.Object]cache.ByObject{
		// Only Joiner's own events are read: a busy cluster's others would
		// cost memory and say nothing the viewer shows.
		&corev1.Event{}: {Field: fields.OneTermEqualSelector("source", EventComponent)},
	}})
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	// NodeOverlays are read where the cluster serves them: one without the
	// CRD has none to apply.
	watchOverlays := true
	for _, obj := range []client.Object{&corev1.Node{}, &corev1.Pod{}, &v1.NodeClaim{}, &v1.NodePool{}, &appsv1.DaemonSet{}, &corev1.Event{}, &v1alpha1.NodeOverlay{}} {
		inf, err := c.GetInformer(ctx, obj)
		if _, overlays := obj.(*v1alpha1.NodeOverlay); overlays && meta.IsNoMatchError(err) {
			watchOverlays = false
			continue
		}
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	cacheErr := make(chan error, 1)
	go func() { cacheErr <- c.Start(ctx) }()

	opts := []tea.ProgramOption{tea.WithContext(ctx)}
	if cfg.In != nil {
		opts = append(opts, tea.WithInput(cfg.In))
	}
	if cfg.Out != nil {
		opts = append(opts, tea.WithOutput(cfg.Out))
	}
	prog := tea.NewProgram(NewModel(cfg.Style, "waiting for the cluster…"), opts...)
	go func() {
		if !c.WaitForCacheSync(ctx) {
			return
		}
		bound := memoBound(cfg.Clock, scheduling.LowerBound)
		ticker := cfg.Clock.NewTicker(resync)
		defer ticker.Stop()
		for {
			in, err := read(ctx, c, cfg.Clock.Now(), watchOverlays)
			if err != nil {
				return
			}
			prog.Send(SnapshotMsg(Build(in, cfg.Options, cfg.Prices, bound)))
			select {
			case <-ctx.Done():
				return
			case <-changed:
				// Gather the rest of a burst (a scale-up changes many
				// pods at once) into one rebuild.
				t := cfg.Clock.NewTimer(debounce)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C():
				}
			case <-ticker.C():
			}
		}
	}()
	_, err = prog.Run()
	cancel()
	if err != nil && ctx.Err() == nil {
		return err
	}
	select {
	case err := <-cacheErr:
		if err != nil {
			return fmt.Errorf("watching the cluster: %w", err)
		}
	default:
	}
	return nil
}

// read lists everything Build needs from the cache.
func read(ctx context.Context, c client.Reader, now time.Time, overlays bool) (Input, error) {
	in := Input{Now: now}
	var nodes corev1.NodeList
	var claims v1.NodeClaimList
	var podList corev1.PodList
	var pools v1.NodePoolList
	var dss appsv1.DaemonSetList
	var events corev1.EventList
	for _, l := range []client.ObjectList{&nodes, &claims, &podList, &pools, &dss, &events} {
		if err := c.List(ctx, l); err != nil {
			return in, err
		}
	}
	in.Nodes, in.NodeClaims, in.Pods, in.NodePools, in.DaemonSets, in.Events = nodes.Items, claims.Items, podList.Items, pools.Items, dss.Items, events.Items
	if overlays {
		var list v1alpha1.NodeOverlayList
		if err := c.List(ctx, &list); err != nil {
			return in, err
		}
		in.NodeOverlays = list.Items
	}
	return in, nil
}

// memoBound computes the LP bound again only when the pods, NodePools or
// DaemonSets changed, or a minute passed (prices may have moved): the LP
// takes a while for thousands of pods, and most rebuilds change neither.
func memoBound(clk clock.PassiveClock, inner Bounder) Bounder {
	var key string
	var val float64
	var verr error
	return func(s scheduling.Snapshot) (float64, error) {
		var parts []string
		for _, p := range s.Pods {
			parts = append(parts, string(p.UID))
		}
		sort.Strings(parts)
		for _, np := range s.NodePools {
			parts = append(parts, fmt.Sprintf("np/%s/%d", np.NodePool.Name, np.NodePool.Generation))
		}
		for _, d := range s.DaemonSets {
			parts = append(parts, fmt.Sprintf("ds/%s/%s/%v", d.Namespace, d.Name, d.Spec.Containers))
		}
		parts = append(parts, clk.Now().Truncate(time.Minute).String())
		k := strings.Join(parts, ",")
		if k != key {
			key = k
			val, verr = inner(s)
		}
		return val, verr
	}
}

// NewAWSPrices makes, per region on first use, the controller's pricing
// provider with AWS clients from the standard chain, refreshed in the
// background. Without credentials (or configuration) it answers from the
// embedded catalog and the note says why.
func NewAWSPrices(ctx context.Context, clk clock.Clock) func(region string) (*pricing.Provider, string) {
	type entry struct {
		p       *pricing.Provider
		note    string
		mu      sync.Mutex
		lastErr string
	}
	var mu sync.Mutex
	byRegion := map[string]*entry{}
	return func(region string) (*pricing.Provider, string) {
		mu.Lock()
		e, ok := byRegion[region]
		if !ok {
			e = &entry{}
			byRegion[region] = e
			isolated := os.Getenv("ISOLATED_VPC") == "true"
			clients, err := credentialed(ctx, region)
			if err != nil {
				e.p = pricing.New(pricing.Options{Region: region, Isolated: true, Clock: clk})
				e.note = "aws nodes: embedded catalog, " + err.Error()
			} else {
				log := funcr.New(func(_, args string) {
					e.mu.Lock()
					e.lastErr = args
					e.mu.Unlock()
				}, funcr.Options{})
				e.p = pricing.New(pricing.Options{Pricing: clients.Pricing, EC2: clients.EC2, Region: region, Isolated: isolated, Clock: clk, Log: log})
				go func() { _ = e.p.Start(ctx) }()
			}
		}
		mu.Unlock()
		if e.note != "" {
			return e.p, e.note
		}
		st := e.p.Status()
		note := fmt.Sprintf("aws nodes (%s): on-demand from %s, spot from %s", region, sourceName(st.OnDemandSource), sourceName(st.SpotSource))
		e.mu.Lock()
		if e.lastErr != "" && (st.OnDemandSource == pricing.SourceCatalog || st.SpotSource == pricing.SourceCatalog) {
			note += " (" + firstLine(e.lastErr) + ")"
		}
		e.mu.Unlock()
		return e.p, note
	}
}

// NewAWSCommitments reads, per region on first use, the account's
// Reserved Instances and Savings Plans with the controller's own reader
// (aws/commitments), kept a minute. Without credentials, or in an
// isolated VPC, it reads none and the header shows list prices alone.
func NewAWSCommitments(ctx context.Context, clk clock.Clock) CommitmentsFunc {
	var mu sync.Mutex
	byRegion := map[string]*commitments.Provider{}
	return func(region string) (commitment.Commitments, error) {
		mu.Lock()
		p, ok := byRegion[region]
		if !ok {
			if os.Getenv("ISOLATED_VPC") != "true" {
				if clients, err := credentialed(ctx, region); err == nil {
					p = &commitments.Provider{EC2: clients.EC2, SavingsPlans: clients.SavingsPlans, Region: region, Clock: clk, Refresh: time.Minute}
				}
			}
			byRegion[region] = p
		}
		mu.Unlock()
		if p == nil {
			return commitment.Commitments{}, nil
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return p.Get(cctx)
	}
}

// credentialed makes the region's AWS clients from the standard chain,
// or says there are no credentials and what to set. The SDK's warnings
// (such as a response body it could not drain) are discarded: written to
// standard error they land in the middle of the screen, which the
// terminal UI then never repaints.
func credentialed(ctx context.Context, region string) (*awsclient.Clients, error) {
	clients, err := awsclient.New(ctx, awsclient.Options{Region: region, Logger: logging.Nop{}})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := clients.Config.Credentials.Retrieve(cctx); err != nil {
		return nil, fmt.Errorf("no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID, or use --disable-pricing (%s)", firstLine(err.Error()))
	}
	return clients, nil
}

func sourceName(s pricing.Source) string {
	if s == pricing.SourceAPI {
		return "AWS"
	}
	return "the embedded catalog"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100]) + "…"
	}
	return s
}
