// Package operator holds Joiner's settings and wires the controller manager:
// clients, leader election, metrics, health probes, logging and controllers.
package operator

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Options are Karpenter's settings, read from flags or the same-named
// environment variables (flag --batch-idle-duration, env BATCH_IDLE_DURATION),
// so a Karpenter Helm values file's settings carry over.
type Options struct {
	CloudProvider         string
	ClusterName           string
	ClusterEndpoint       string
	BatchIdleDuration     time.Duration
	BatchMaxDuration      time.Duration
	LogLevel              string
	MetricsPort           int
	HealthProbePort       int
	KubeClientQPS         int
	KubeClientBurst       int
	DisableLeaderElection bool
	// EnableProfiling serves Go's pprof profiles on the metrics port.
	EnableProfiling bool
	// DisableClusterStateObservability turns off the scrape-time
	// cluster-state gauges (nodes, pods, NodePools) and the pod timings.
	DisableClusterStateObservability bool
	// AMIRefreshInterval is how often the alias parameters are read;
	// SubnetRefreshInterval how often each class is resolved again.
	AMIRefreshInterval time.Duration
	// CPURequests is the container's CPU request in millicores (the chart
	// passes it); it sets GOMAXPROCS when GOMAXPROCS is unset.
	CPURequests int
	// KubernetesMinVersion is the oldest API server Joiner starts against.
	KubernetesMinVersion  string
	SubnetRefreshInterval time.Duration
	// InstanceProfileGCInterval is how often unused instance profiles are
	// collected (aws).
	InstanceProfileGCInterval time.Duration
	// CommitmentsRefreshInterval is how long the account's RIs and
	// Savings Plans are kept before they are read again (aws).
	CommitmentsRefreshInterval time.Duration
	LeaderElectionName         string
	LeaderElectionNS           string
	PreferencePolicy           string
	MinValuesPolicy            string
	FeatureGates               FeatureGates
	InterruptionQueue          string
	// The aws provider's settings, as Karpenter's AWS provider names them.
	ClusterCABundle         string
	IsolatedVPC             bool
	VMMemoryOverheadPercent float64
	ReservedENIs            int
	EKSControlPlane         bool
	// EnableZonalShift follows the cluster's ARC zonal shifts: a zone
	// shifted away from offers no capacity until the shift ends (aws).
	EnableZonalShift       bool
	Region                 string
	KwokRegion             string
	KwokZones              []string
	KwokLaunchDelay        time.Duration
	RegistrationTTL        time.Duration
	LaunchTTL              time.Duration
	GarbageCollectInterval time.Duration
	GarbageCollectMinAge   time.Duration
	DisruptionPoll         time.Duration

	// UnavailableTTL is how long an offering EC2 refused for capacity stays
	// out; zero is unavailable.DefaultTTL, Karpenter's fixed 3 minutes.
	// Internal: no flag or variable sets it, since Karpenter has none. Only
	// a binary built with the joinertest tag reads it from the environment
	// (testhooks_joinertest.go), so an end-to-end test can watch an entry
	// expire without waiting 3 minutes.
	UnavailableTTL time.Duration
	// RepairToleration, when set, replaces every node repair policy's
	// toleration (30 minutes for a NotReady node). Internal like
	// UnavailableTTL: the tests cannot wait half an hour.
	RepairToleration time.Duration
	// PriceRetryInterval is how soon a failed price refresh is retried;
	// zero is pricing.SpotInterval. Internal like UnavailableTTL, so an
	// end-to-end test can watch a refused Price List permission granted.
	PriceRetryInterval time.Duration
}

// testHooks reads the internal options a test binary may set; nil in a
// product build.
var testHooks func(o *Options, getenv func(string) string) error

// FeatureGates are Karpenter's feature gates. Every gate Karpenter's Helm
// chart writes is accepted, so its FEATURE_GATES value carries over; a gate
// Joiner cannot honour is refused at start when turned on, never ignored.
type FeatureGates struct {
	SpotToSpotConsolidation bool
	NodeRepair              bool
	ReservedCapacity        bool
	StaticCapacity          bool
	NodeOverlay             bool
	CapacityBuffer          bool
}

// unsupported lists why the gates that are on but not implemented cannot be.
func (fg FeatureGates) unsupported() []string {
	var out []string
	return out
}

type setting struct {
	flag, env, def, usage string
	parse                 func(o *Options, v string) error
}

func durationSetting(flagName, env, def, usage string, dst func(*Options) *time.Duration) setting {
	return setting{flagName, env, def, usage, func(o *Options, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a non-negative duration such as 1s or 10m")
		}
		*dst(o) = d
		return nil
	}}
}

func intSetting(flagName, env, def, usage string, min, max int, dst func(*Options) *int) setting {
	return setting{flagName, env, def, usage, func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			return fmt.Errorf("want an integer from %d to %d", min, max)
		}
		*dst(o) = n
		return nil
	}}
}

func enumSetting(flagName, env, def, usage string, allowed []string, dst func(*Options) *string) setting {
	return setting{flagName, env, def, usage, func(o *Options, v string) error {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				*dst(o) = a
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
	}}
}

func stringSetting(flagName, env, def, usage string, dst func(*Options) *string) setting {
	return setting{flagName, env, def, usage, func(o *Options, v string) error { *dst(o) = v; return nil }}
}

func boolSetting(flagName, env, def, usage string, dst func(*Options) *bool) setting {
	return setting{flagName, env, def, usage, func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*dst(o) = b
		return nil
	}}
}

var settings = []setting{
	enumSetting("cloud-provider", "CLOUD_PROVIDER", "kwok", "cloud provider: kwok (fake nodes) or aws", []string{"kwok", "aws"}, func(o *Options) *string { return &o.CloudProvider }),
	stringSetting("cluster-name", "CLUSTER_NAME", "", "cluster name, used to tag and find cloud resources (required for aws)", func(o *Options) *string { return &o.ClusterName }),
	stringSetting("cluster-endpoint", "CLUSTER_ENDPOINT", "", "API server endpoint nodes join; discovered when empty", func(o *Options) *string { return &o.ClusterEndpoint }),
	durationSetting("batch-idle-duration", "BATCH_IDLE_DURATION", "1s", "end a provisioning batch after this long with no new pending pod", func(o *Options) *time.Duration { return &o.BatchIdleDuration }),
	durationSetting("batch-max-duration", "BATCH_MAX_DURATION", "10s", "end a provisioning batch after this long in any case", func(o *Options) *time.Duration { return &o.BatchMaxDuration }),
	enumSetting("log-level", "LOG_LEVEL", "info", "log level", []string{"debug", "info", "error"}, func(o *Options) *string { return &o.LogLevel }),
	intSetting("metrics-port", "METRICS_PORT", "8080", "port of the Prometheus metrics endpoint", 0, 65535, func(o *Options) *int { return &o.MetricsPort }),
	intSetting("health-probe-port", "HEALTH_PROBE_PORT", "8081", "port of the /healthz and /readyz probes", 0, 65535, func(o *Options) *int { return &o.HealthProbePort }),
	intSetting("kube-client-qps", "KUBE_CLIENT_QPS", "200", "Kubernetes API requests per second", 1, 100000, func(o *Options) *int { return &o.KubeClientQPS }),
	intSetting("kube-client-burst", "KUBE_CLIENT_BURST", "300", "Kubernetes API request burst", 1, 100000, func(o *Options) *int { return &o.KubeClientBurst }),
	boolSetting("disable-leader-election", "DISABLE_LEADER_ELECTION", "false", "run without leader election (one replica only)", func(o *Options) *bool { return &o.DisableLeaderElection }),
	boolSetting("enable-profiling", "ENABLE_PROFILING", "false", "serve Go's pprof profiles under /debug/pprof/ on the metrics port", func(o *Options) *bool { return &o.EnableProfiling }),
	boolSetting("disable-cluster-state-observability", "DISABLE_CLUSTER_STATE_OBSERVABILITY", "false", "serve no node, pod and NodePool gauges and no pod timings (karpenter_nodes_*, karpenter_pods_*, karpenter_nodepools_*)", func(o *Options) *bool { return &o.DisableClusterStateObservability }),
	stringSetting("leader-election-name", "LEADER_ELECTION_NAME", "joiner-leader-election", "name of the leader election Lease", func(o *Options) *string { return &o.LeaderElectionName }),
	stringSetting("leader-election-namespace", "LEADER_ELECTION_NAMESPACE", "", "namespace of the Lease; the pod's namespace or kube-system when empty", func(o *Options) *string { return &o.LeaderElectionNS }),
	enumSetting("preference-policy", "PREFERENCE_POLICY", "Respect", "Respect preferred scheduling terms (dropped one by one while a pod does not fit) or Ignore them", []string{"Respect", "Ignore"}, func(o *Options) *string { return &o.PreferencePolicy }),
	enumSetting("min-values-policy", "MIN_VALUES_POLICY", "Strict", "Strict: launch no NodeClaim whose instance types miss a requirement's minValues; BestEffort: launch with fewer and mark it", []string{"Strict", "BestEffort"}, func(o *Options) *string { return &o.MinValuesPolicy }),
	{"feature-gates", "FEATURE_GATES", "", "feature gates, e.g. SpotToSpotConsolidation=true,NodeRepair=true", func(o *Options, v string) error {
		fg, err := ParseFeatureGates(v)
		o.FeatureGates = fg
		if err != nil {
			return err
		}
		if bad := fg.unsupported(); len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	}},
	stringSetting("interruption-queue", "INTERRUPTION_QUEUE", "", "SQS queue name for spot interruption and health events (aws)", func(o *Options) *string { return &o.InterruptionQueue }),
	stringSetting("cluster-ca-bundle", "CLUSTER_CA_BUNDLE", "", "base64 CA bundle of the API server nodes join; discovered when empty (aws)", func(o *Options) *string { return &o.ClusterCABundle }),
	boolSetting("isolated-vpc", "ISOLATED_VPC", "false", "the VPC has no internet access: skip the Pricing API and use the embedded prices (aws)", func(o *Options) *bool { return &o.IsolatedVPC }),
	{"vm-memory-overhead-percent", "VM_MEMORY_OVERHEAD_PERCENT", "0.075", "fraction of an instance's memory the hypervisor and OS keep (aws)", func(o *Options, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f >= 1 {
			return errors.New("want a fraction between 0 and 1, such as 0.075")
		}
		o.VMMemoryOverheadPercent = f
		return nil
	}},
	intSetting("reserved-enis", "RESERVED_ENIS", "0", "network interfaces per instance kept from pods, which lowers max pods (aws)", 0, 1000, func(o *Options) *int { return &o.ReservedENIs }),
	boolSetting("eks-control-plane", "EKS_CONTROL_PLANE", "false", "the cluster is an EKS cluster: discover the endpoint and CA through eks:DescribeCluster (aws)", func(o *Options) *bool { return &o.EKSControlPlane }),
	boolSetting("enable-zonal-shift", "ENABLE_ZONAL_SHIFT", "false", "follow the cluster's ARC zonal shifts: launch nothing into a zone traffic is shifted away from, until the shift ends (aws; needs arc-zonal-shift:GetManagedResource on the cluster)", func(o *Options) *bool { return &o.EnableZonalShift }),
	stringSetting("region", "AWS_REGION", "", "AWS region; the SDK's chain (shared config, IMDS) when empty (aws)", func(o *Options) *string { return &o.Region }),
	stringSetting("kwok-region", "KWOK_REGION", "us-east-1", "region of the kwok provider's catalog", func(o *Options) *string { return &o.KwokRegion }),
	{"kwok-zones", "KWOK_ZONES", "", "comma-separated zones of the kwok provider; <region>a,b,c when empty", func(o *Options, v string) error {
		o.KwokZones = nil
		for _, z := range strings.Split(v, ",") {
			if z = strings.TrimSpace(z); z != "" {
				o.KwokZones = append(o.KwokZones, z)
			}
		}
		return nil
	}},
	durationSetting("kwok-launch-delay", "KWOK_LAUNCH_DELAY", "0s", "how long a kwok instance takes to boot", func(o *Options) *time.Duration { return &o.KwokLaunchDelay }),
	durationSetting("launch-ttl", "LAUNCH_TTL", "5m", "delete a NodeClaim that has not launched after this long", func(o *Options) *time.Duration { return &o.LaunchTTL }),
	durationSetting("registration-ttl", "REGISTRATION_TTL", "15m", "delete a NodeClaim whose node has not registered after this long", func(o *Options) *time.Duration { return &o.RegistrationTTL }),
	intSetting("cpu-requests", "CPU_REQUESTS", "0", "the container's CPU request in millicores; sets GOMAXPROCS (rounded up to whole CPUs) when GOMAXPROCS is unset; 0 leaves it to Go", 0, 1000000, func(o *Options) *int { return &o.CPURequests }),
	stringSetting("kubernetes-min-version", "KUBERNETES_MIN_VERSION", "", "refuse to start against an API server older than this version (Karpenter's chart passes 1.19.0-0)", func(o *Options) *string { return &o.KubernetesMinVersion }),
	durationSetting("ami-refresh-interval", "AMI_REFRESH_INTERVAL", "1m", "how often the SSM parameters behind @latest aliases are read; a new image reaches status.amis (and drifts nodes) within it (aws)", func(o *Options) *time.Duration { return &o.AMIRefreshInterval }),
	durationSetting("subnet-refresh-interval", "SUBNET_REFRESH_INTERVAL", "1m", "how often each EC2NodeClass's subnets, security groups, AMIs and instance profile are resolved again (aws)", func(o *Options) *time.Duration { return &o.SubnetRefreshInterval }),
	durationSetting("commitments-refresh-interval", "COMMITMENTS_REFRESH_INTERVAL", "15m", "how long the account's active Reserved Instances and Savings Plans (and the plans' rates) are kept before they are read again; planning, consolidation and karpenter_nodepools_cost_total price nodes as the bill does under them (aws; not with ISOLATED_VPC); at least 5s", func(o *Options) *time.Duration { return &o.CommitmentsRefreshInterval }),
	durationSetting("instance-profile-gc-interval", "INSTANCE_PROFILE_GC_INTERVAL", "30m", "how often the instance profiles Joiner or Karpenter created for this cluster that no class uses and no NodeClaim names are deleted; a profile a class just left or took is spared twice this; Karpenter's 30 minutes (aws; not with ISOLATED_VPC)", func(o *Options) *time.Duration { return &o.InstanceProfileGCInterval }),
	durationSetting("disruption-poll", "DISRUPTION_POLL", "10s", "how often voluntary disruption decides", func(o *Options) *time.Duration { return &o.DisruptionPoll }),
	durationSetting("garbage-collect-min-age", "GARBAGE_COLLECT_MIN_AGE", "30s", "spare instances younger than this, whose NodeClaim may still be recording its launch", func(o *Options) *time.Duration { return &o.GarbageCollectMinAge }),
	durationSetting("garbage-collect-interval", "GARBAGE_COLLECT_INTERVAL", "30s", "how often to look for instances without a NodeClaim", func(o *Options) *time.Duration { return &o.GarbageCollectInterval }),
}

// Parse reads settings from args (flags win) and the environment. Every
// error names the setting, its flag and variable, the bad value and the fix.
func Parse(args []string, getenv func(string) string) (*Options, error) {
	o, errs, err := parse(settings, args, getenv)
	if err != nil {
		return nil, err
	}
	if testHooks != nil {
		if err := testHooks(o, getenv); err != nil {
			errs = append(errs, err)
		}
	}
	if o.BatchMaxDuration < o.BatchIdleDuration {
		errs = append(errs, fmt.Errorf("invalid setting BATCH_MAX_DURATION %s: must not be shorter than BATCH_IDLE_DURATION %s", o.BatchMaxDuration, o.BatchIdleDuration))
	}
	errs = append(errs, unimplemented(getenv)...)
	if v := o.KubernetesMinVersion; v != "" {
		if _, err := version.ParseGeneric(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid setting KUBERNETES_MIN_VERSION %q: %v; use a version such as 1.19.0", v, err))
		}
	}
	for _, d := range []struct {
		env string
		v   time.Duration
	}{{"AMI_REFRESH_INTERVAL", o.AMIRefreshInterval}, {"SUBNET_REFRESH_INTERVAL", o.SubnetRefreshInterval}} {
		if d.v < 5*time.Second {
			errs = append(errs, fmt.Errorf("invalid setting %s %s: must be at least 5s (Karpenter's default is 1m)", d.env, d.v))
		}
	}
	if o.CommitmentsRefreshInterval < 5*time.Second {
		errs = append(errs, fmt.Errorf("invalid setting COMMITMENTS_REFRESH_INTERVAL %s: must be at least 5s (the default is 15m)", o.CommitmentsRefreshInterval))
	}
	if o.DisruptionPoll <= 0 {
		errs = append(errs, fmt.Errorf("invalid setting DISRUPTION_POLL %s: must be positive", o.DisruptionPoll))
	}
	if o.InstanceProfileGCInterval <= 0 {
		errs = append(errs, fmt.Errorf("invalid setting INSTANCE_PROFILE_GC_INTERVAL %s: must be positive (Karpenter's is 30m)", o.InstanceProfileGCInterval))
	}
	if o.CloudProvider == "aws" && o.ClusterName == "" {
		errs = append(errs, errors.New("missing setting CLUSTER_NAME (--cluster-name): the aws provider tags and finds instances by cluster name; set it to your EKS cluster's name"))
	}
	if o.CloudProvider != "aws" && o.EnableZonalShift {
		errs = append(errs, errors.New("invalid setting ENABLE_ZONAL_SHIFT true: zonal shifts are ARC's, on EKS clusters; it needs --cloud-provider=aws (or set it false)"))
	}
	if o.CloudProvider != "aws" && o.InterruptionQueue != "" {
		errs = append(errs, fmt.Errorf("invalid setting INTERRUPTION_QUEUE %q: interruption messages come from AWS; it needs --cloud-provider=aws (or leave it empty)", o.InterruptionQueue))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

func parse(list []setting, args []string, getenv func(string) string) (*Options, []error, error) {
	fs := flag.NewFlagSet("joiner", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	values := map[string]*string{}
	for _, s := range list {
		values[s.flag] = fs.String(s.flag, "", fmt.Sprintf("%s (env %s, default %q)", s.usage, s.env, s.def))
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o := &Options{}
	var errs []error
	for _, s := range list {
		v, source := s.def, "default"
		if env := getenv(s.env); env != "" {
			v, source = env, "env "+s.env
		}
		if set[s.flag] {
			v, source = *values[s.flag], "flag --"+s.flag
		}
		if err := s.parse(o, v); err != nil {
			errs = append(errs, fmt.Errorf("invalid setting %s (--%s, from %s) %q: %w", s.env, s.flag, source, v, err))
		}
	}
	return o, errs, nil
}

// Scheduling is the solver configuration the settings make. The
// provisioner, disruption and `joiner plan` all plan with it, so one
// setting shapes every plan alike.
func (o *Options) Scheduling() scheduling.Options {
	return scheduling.Options{
		PreferencePolicy: scheduling.PreferencePolicy(o.PreferencePolicy),
		MinValuesPolicy:  scheduling.MinValuesPolicy(o.MinValuesPolicy),
	}
}

// PlanningSetting describes a setting that shapes plans, for a command
// that plans without the controller to offer as a flag.
type PlanningSetting struct {
	Flag, Env, Default, Usage string
}

// planning names the settings that shape plans.
var planning = map[string]bool{"preference-policy": true, "min-values-policy": true}

// PlanningSettings lists the settings that shape plans.
func PlanningSettings() []PlanningSetting {
	var out []PlanningSetting
	for _, s := range settings {
		if planning[s.flag] {
			out = append(out, PlanningSetting{Flag: s.flag, Env: s.env, Default: s.def, Usage: s.usage})
		}
	}
	return out
}

// ParsePlanning reads only the settings that shape plans, from args (flags
// win) and the environment, with Parse's errors.
func ParsePlanning(args []string, getenv func(string) string) (scheduling.Options, error) {
	var list []setting
	for _, s := range settings {
		if planning[s.flag] {
			list = append(list, s)
		}
	}
	o, errs, err := parse(list, args, getenv)
	if err != nil {
		return scheduling.Options{}, err
	}
	if len(errs) > 0 {
		return scheduling.Options{}, errors.Join(errs...)
	}
	return o.Scheduling(), nil
}

// ParseFeatureGates parses "Name=bool,..." with Karpenter's gate names.
func ParseFeatureGates(v string) (FeatureGates, error) {
	fg := FeatureGates{ReservedCapacity: true}
	gates := map[string]*bool{
		"SpotToSpotConsolidation": &fg.SpotToSpotConsolidation, "NodeRepair": &fg.NodeRepair,
		"ReservedCapacity": &fg.ReservedCapacity, "StaticCapacity": &fg.StaticCapacity, "NodeOverlay": &fg.NodeOverlay,
		"CapacityBuffer": &fg.CapacityBuffer,
	}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		dst, known := gates[strings.TrimSpace(name)]
		if !known {
			names := make([]string, 0, len(gates))
			for n := range gates {
				names = append(names, n)
			}
			sort.Strings(names)
			return fg, fmt.Errorf("unknown feature gate %q; known gates are %s", name, strings.Join(names, ", "))
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if !ok || err != nil {
			return fg, fmt.Errorf("feature gate %q needs =true or =false", name)
		}
		*dst = b
	}
	return fg, nil
}

// fixedSettings are Karpenter's settings that Joiner implements at one
// value only. Set to that value (or unset) they are accepted, so a
// Karpenter deployment's environment carries over; set to another, the
// start fails, naming the setting, rather than run without what it asks.
var fixedSettings = []struct {
	env      string
	accepted []string
	why      string
}{
	{"IGNORE_DRA_REQUESTS", []string{"true"}, "Joiner does not plan for DRA resource claims yet, so it ignores them as Karpenter's default does"},
	{"LOG_OUTPUT_PATHS", []string{"stdout"}, "Joiner logs to standard output only"},
	{"LOG_ERROR_OUTPUT_PATHS", []string{"stderr"}, "Joiner logs errors to standard error only"},
	// Joiner makes no dry-run calls, so either value behaves the same.
	{"DISABLE_DRY_RUN", []string{"true", "false"}, "it is a boolean"},
}

func unimplemented(getenv func(string) string) []error {
	var errs []error
	for _, s := range fixedSettings {
		v := getenv(s.env)
		if v == "" || slices.Contains(s.accepted, strings.ToLower(strings.TrimSpace(v))) {
			continue
		}
		errs = append(errs, fmt.Errorf("invalid setting %s %q: %s; unset it or set %s", s.env, v, s.why, strings.Join(s.accepted, " or ")))
	}
	return errs
}
