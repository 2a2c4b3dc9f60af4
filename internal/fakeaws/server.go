// Package fakeaws is a local AWS endpoint for testing Joiner's AWS provider:
// a thin front on moto (a well-known AWS emulator, run as a child process)
// that forwards every call moto answers well and adds only what moto lacks:
// the Price List API, the public SSM parameters of the EKS node images (and
// their AMIs), realistic spot prices, EC2's capacity errors and eventual
// consistency, injected faults, a call log, and instances that boot into
// Nodes of a real Kubernetes cluster from their user data.
//
// It deliberately imports nothing of the provider it tests: the wire formats
// here are written from AWS's documentation and moto's answers, so a
// misreading in the provider shows up as a failure instead of being echoed.
package fakeaws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
)

// Options configure the endpoint.
type Options struct {
	// ClusterName names the cluster the seeded resources are tagged for
	// (karpenter.sh/discovery=<name>), the EKS cluster, the node role
	// (KarpenterNodeRole-<name>) and the interruption queue. Required.
	ClusterName string
	// Region is the region seeded and watched; default us-east-1.
	Region string
	// Kubeconfig is the cluster instances join as Nodes, and whose API
	// server and CA DescribeCluster reports. Without it no Node is created
	// and DescribeCluster answers moto's made-up values.
	Kubeconfig string
	// Listen is the address to serve on; default 127.0.0.1:0 (a free port).
	Listen string
	// MotoServer is the moto_server program; default "moto_server" on PATH.
	MotoServer string
	// CallLog, when set, receives every call as a JSON line.
	CallLog io.Writer
	// Faults are injected from the start; SetFaults changes them later.
	Faults Faults
	// KubernetesVersions whose node images are published; default
	// DefaultKubernetesVersions.
	KubernetesVersions []string
	// ServiceCIDR is the cluster's service CIDR that DescribeCluster
	// reports; default 10.96.0.0/16, the local control plane's.
	ServiceCIDR string
	// MemoryOverheadPercent is the share of an instance's memory a Node does
	// not report as capacity (what the hypervisor and kernel keep).
	MemoryOverheadPercent float64
	// PollInterval is how often instances are checked for booting and
	// termination; default 200ms.
	PollInterval time.Duration
	// Clock times eventual consistency and polling; default the real clock.
	Clock clock.WithTicker
	// Log receives what the endpoint does; default discards.
	Log logr.Logger
	// IAMEnforce authorizes every call as AWS would for the identity that
	// signed it (iamEnforcer): the admin credentials Start makes
	// (AdminCredentials), or a role's session from STS. Without it every
	// call is allowed. With it the node role and the interruption queue are
	// not seeded: the guide's CloudFormation stack creates them.
	IAMEnforce bool
	// IAMSimulateModules is the node_modules folder of the IAM evaluator,
	// which hack/setup.sh installs (its iamsim= line).
	IAMSimulateModules string
}

// Server is a running endpoint.
type Server struct {
	opts     Options
	region   string
	clock    clock.WithTicker
	log      logr.Logger
	listener net.Listener
	http     *http.Server
	moto     *moto
	client   *http.Client

	motoEC2 *ec2.Client
	motoIAM *iam.Client
	motoEKS *eks.Client
	motoSQS *sqs.Client

	images  *imageCatalog
	catalog regionTypes
	faults  faultState
	tokens  clientTokens
	calls   callLog
	seed    Seed
	cluster *clusterInfo
	nodes   *nodeBooter
	iam     *iamEnforcer
	pgs     placementGroups
	crs     capacityReservations
	ris     reservedInstances
	sps     savingsPlans
	shifts  zonalShifts
	podIDs  podIdentities

	mu       sync.Mutex
	launches map[string]launch
	// health holds the status checks and events tests set (SetInstanceHealth).
	health map[string]InstanceHealth
	// spotPrices are prices set through SetSpotPrice, by type.
	spotPrices map[string]float64
	zones      map[string][]zoneInfo // by region
	subnets    map[string]string     // subnet ID → zone

	cancel context.CancelFunc
	done   chan struct{}
}

// clusterInfo is the cluster instances join.
type clusterInfo struct {
	endpoint   string
	ca         []byte
	version    string // major.minor
	gitVersion string
	kube       kubernetes.Interface
}

// Start runs moto, seeds it, and serves the endpoint until Stop.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.ClusterName == "" {
		return nil, errors.New("fake-aws: the cluster name is required (--cluster-name)")
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if len(opts.KubernetesVersions) == 0 {
		opts.KubernetesVersions = DefaultKubernetesVersions
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 200 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MemoryOverheadPercent < 0 || opts.MemoryOverheadPercent >= 100 {
		return nil, fmt.Errorf("fake-aws: memory overhead %v%%: must be at least 0 and below 100", opts.MemoryOverheadPercent)
	}
	if err := opts.Faults.Validate(); err != nil {
		return nil, fmt.Errorf("fake-aws: faults: %w", err)
	}
	s := &Server{
		opts: opts, region: opts.Region, clock: opts.Clock, log: opts.Log,
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		launches: map[string]launch{}, health: map[string]InstanceHealth{}, zones: map[string][]zoneInfo{}, subnets: map[string]string{},
		images: newImageCatalog(opts.KubernetesVersions, opts.Clock.Now()),
		done:   make(chan struct{}),
	}
	s.faults.set(opts.Faults)
	s.calls.w = opts.CallLog
	defer func() {
		if err != nil {
			s.Stop() // the result is nil on error: stop what was started
		}
	}()

	if opts.Kubeconfig != "" {
		if s.cluster, err = loadCluster(opts.Kubeconfig); err != nil {
			return nil, err
		}
	}
	amis, err := s.images.motoAMIs()
	if err != nil {
		return nil, err
	}
	if s.moto, err = startMoto(ctx, opts.MotoServer, amis); err != nil {
		return nil, err
	}
	cfg := aws.Config{
		Region:       s.region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(s.moto.url),
		HTTPClient:   s.client,
	}
	s.motoEC2, s.motoIAM, s.motoEKS, s.motoSQS = ec2.NewFromConfig(cfg), iam.NewFromConfig(cfg), eks.NewFromConfig(cfg), sqs.NewFromConfig(cfg)

	if opts.IAMEnforce {
		if s.iam, err = s.startIAM(ctx); err != nil {
			return nil, err
		}
	}
	if s.seed, err = s.seedMoto(ctx); err != nil {
		return nil, fmt.Errorf("fake-aws: seeding moto: %w", err)
	}
	if s.listener, err = net.Listen("tcp", opts.Listen); err != nil {
		return nil, fmt.Errorf("fake-aws: listening on %s: %w", opts.Listen, err)
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.http.Serve(s.listener) }()

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.cluster != nil {
		s.nodes = newNodeBooter(s)
		go func() {
			defer close(s.done)
			s.nodes.run(runCtx)
		}()
	} else {
		close(s.done)
	}
	s.log.Info("fake-aws serving", "url", s.URL(), "moto", s.moto.url, "cluster", opts.ClusterName, "region", s.region)
	return s, nil
}

func loadCluster(kubeconfig string) (*clusterInfo, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("fake-aws: kubeconfig %s: %w", kubeconfig, err)
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("fake-aws: kubeconfig %s: %w", kubeconfig, err)
	}
	if len(cfg.CAData) == 0 {
		return nil, fmt.Errorf("fake-aws: kubeconfig %s has no certificate authority: nodes verify the API server with it", kubeconfig)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("fake-aws: the cluster in %s does not answer: %w", kubeconfig, err)
	}
	minor := v.Minor
	for len(minor) > 0 && (minor[len(minor)-1] < '0' || minor[len(minor)-1] > '9') {
		minor = minor[:len(minor)-1] // "33+" on some distributions
	}
	return &clusterInfo{endpoint: cfg.Host, ca: cfg.CAData, version: v.Major + "." + minor, gitVersion: v.GitVersion, kube: kube}, nil
}

// URL is the endpoint's address, for AWS_ENDPOINT_URL.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// MotoURL is moto's own address, behind the endpoint.
func (s *Server) MotoURL() string { return s.moto.url }

// Seed describes what Start created in moto.
func (s *Server) Seed() Seed { return s.seed }

// SetFaults replaces the injected faults.
func (s *Server) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.faults.set(f)
	return nil
}

// Faults returns the injected faults.
func (s *Server) Faults() Faults { return s.faults.get() }

// Stop ends the watcher, the listener and moto.
func (s *Server) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.http.Shutdown(ctx)
		cancel()
	}
	if s.moto != nil {
		s.moto.stop()
	}
	if s.iam != nil {
		s.iam.eval.stop()
	}
}

// answer is the endpoint's reply to one call, with what the call log needs.
type answer struct {
	status int
	header http.Header
	body   []byte
	fault  string
	// message is a refusal's message, kept in the call log.
	message   string
	instances []string
	// replayed is an earlier call's answer given again for its client
	// token.
	replayed bool
}

func errorAnswer(c *call, e awsError) *answer {
	rec := &recorder{header: http.Header{}}
	e.write(rec, c)
	return &answer{status: rec.status, header: rec.header, body: rec.body.Bytes()}
}

func xmlAnswer(body string) *answer {
	return &answer{status: http.StatusOK, header: http.Header{"Content-Type": {"text/xml;charset=UTF-8"}}, body: []byte(body)}
}

func newRequestID() string { return uuid.NewString() }

// recorder captures an http.ResponseWriter's output.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// ServeHTTP answers AWS calls and, under /_fake/, the admin API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Path) >= 7 && r.URL.Path[:7] == "/_fake/" {
		s.admin(w, r)
		return
	}
	if r.URL.Path == PodIdentityPath && r.Method == http.MethodGet {
		s.podCredentials(w, r)
		return
	}
	start := s.clock.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := identify(r, body)
	if s.iam != nil {
		c.Principal = s.iam.principal(r)
		if denied := s.iam.authorize(r.Context(), c, r); denied != nil {
			a := errorAnswer(c, *denied)
			a.fault, a.message = faultIAMDenied, denied.Message
			if denied.Status >= 500 {
				a.fault = faultIAMError
			}
			s.reply(w, c, a, start)
			return
		}
	}
	latency, fault := s.faults.decide(c)
	if latency > 0 {
		select {
		case <-s.clock.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	// Once a call reaches the backend it runs to the end, as in AWS: a
	// client that disconnects (a controller killed mid-launch) does not
	// undo a launch, and the log must show what it started.
	backend := context.WithoutCancel(r.Context())
	var a *answer
	switch fault {
	case "":
		a = s.dispatch(backend, c, r)
	case faultLost:
		// The backend acts; the answer is lost on the way back. What the
		// call launched stays in the log.
		done := s.dispatch(backend, c, r)
		a = errorAnswer(c, injectedError(c, fault))
		a.fault, a.instances, a.replayed = fault, done.instances, done.replayed
	default:
		a = errorAnswer(c, injectedError(c, fault))
		a.fault = fault
	}
	if s.iam != nil {
		s.iam.observe(c, a)
	}
	s.reply(w, c, a, start)
}

// reply writes a, and logs the call.
func (s *Server) reply(w http.ResponseWriter, c *call, a *answer, start time.Time) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
	s.calls.add(Call{
		Time: start, Service: c.Service, Action: c.Action, Region: c.Region, Params: c.params(),
		Status: a.status, ErrorCode: errorCode(a), ErrorMessage: a.message, Fault: a.fault, Principal: c.Principal, Instances: a.instances, Replayed: a.replayed,
		LatencyMS: float64(s.clock.Since(start).Microseconds()) / 1000,
	})
}

func (s *Server) dispatch(ctx context.Context, c *call, r *http.Request) *answer {
	switch c.key() {
	case "pricing:GetProducts", "api.pricing:GetProducts":
		return s.getProducts(c)
	case "ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath":
		return s.ssm(ctx, c, r)
	case "ec2:DescribeSpotPriceHistory":
		return s.spotPriceHistory(ctx, c)
	case "ec2:CreateFleet":
		return s.tokens.once(c, func() *answer { return s.createFleet(ctx, c, r) })
	case "ec2:RunInstances":
		return s.tokens.once(c, func() *answer { return s.runInstances(ctx, c, r) })
	case "ec2:DescribeInstances":
		return s.describeInstances(ctx, c, r)
	case "ec2:CreateCapacityReservation":
		return s.createCapacityReservation(c)
	case "ec2:DescribeCapacityReservations":
		return s.describeCapacityReservations(ctx, c)
	case "ec2:CancelCapacityReservation":
		return s.cancelCapacityReservation(c)
	case "ec2:CreatePlacementGroup":
		return s.createPlacementGroup(c)
	case "ec2:DescribePlacementGroups":
		return s.describePlacementGroups(c)
	case "ec2:DeletePlacementGroup":
		return s.deletePlacementGroup(c)
	case "ec2:DescribeReservedInstancesOfferings":
		return s.describeReservedInstancesOfferings(c)
	case "ec2:PurchaseReservedInstancesOffering":
		return s.purchaseReservedInstancesOffering(c)
	case "ec2:DescribeReservedInstances":
		return s.describeReservedInstances(c)
	case "savingsplans:DescribeSavingsPlansOfferings", "savingsplans:CreateSavingsPlan", "savingsplans:DescribeSavingsPlans", "savingsplans:DescribeSavingsPlanRates":
		return s.savingsPlansCall(c)
	case "ec2:DescribeInstanceStatus":
		return s.describeInstanceStatus(ctx, c, r)
	case "eks:DescribeCluster":
		return s.describeCluster(ctx, c, r)
	case "eks:CreatePodIdentityAssociation", "eks:ListPodIdentityAssociations", "eks:DescribePodIdentityAssociation", "eks:DeletePodIdentityAssociation":
		return s.podIdentityAssociations(ctx, c, r)
	case "arc-zonal-shift:StartZonalShift", "arc-zonal-shift:ListZonalShifts", "arc-zonal-shift:UpdateZonalShift",
		"arc-zonal-shift:CancelZonalShift", "arc-zonal-shift:GetManagedResource":
		return s.arcZonalShift(ctx, c, r)
	case "cloudformation:CreateChangeSet", "cloudformation:CreateStack", "cloudformation:UpdateStack":
		return s.forward(ctx, r, fixPolicyDocuments(c))
	}
	return s.forward(ctx, r, c.Body)
}

// forward sends the request to moto with body, and returns moto's answer.
func (s *Server) forward(ctx context.Context, r *http.Request, body []byte) *answer {
	req, err := http.NewRequestWithContext(ctx, r.Method, s.moto.url+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return &answer{status: http.StatusBadGateway, header: http.Header{}, body: []byte(err.Error())}
	}
	for k, v := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Connection", "Accept-Encoding", "Expect":
			continue
		}
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return &answer{status: http.StatusBadGateway, header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("fake-aws: moto did not answer: " + err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return &answer{status: http.StatusBadGateway, header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("fake-aws: reading moto's answer: " + err.Error())}
	}
	h := http.Header{}
	for k, v := range resp.Header {
		switch k {
		case "Content-Length", "Connection", "Transfer-Encoding", "Date", "Server":
			continue
		}
		h[k] = v
	}
	return &answer{status: resp.StatusCode, header: h, body: b}
}

// writeJSON answers an admin call.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// tempFile writes data to a new file in dir and returns its path.
func tempFile(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	return filepath.Clean(f.Name()), f.Close()
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
