package operator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, o *Options)
	}{
		{name: "defaults", check: func(t *testing.T, o *Options) {
			if o.BatchIdleDuration != time.Second || o.BatchMaxDuration != 10*time.Second || o.CloudProvider != "kwok" || o.MetricsPort != 8080 || o.HealthProbePort != 8081 ||
				o.CommitmentsRefreshInterval != 15*time.Minute {
				t.Fatalf("%+v", o)
			}
		}},
		{name: "env", env: map[string]string{"BATCH_IDLE_DURATION": "2s", "FEATURE_GATES": "SpotToSpotConsolidation=true"}, check: func(t *testing.T, o *Options) {
			if o.BatchIdleDuration != 2*time.Second || !o.FeatureGates.SpotToSpotConsolidation {
				t.Fatalf("%+v", o)
			}
		}},
		{name: "flag wins over env", args: []string{"--batch-idle-duration=3s"}, env: map[string]string{"BATCH_IDLE_DURATION": "2s"}, check: func(t *testing.T, o *Options) {
			if o.BatchIdleDuration != 3*time.Second {
				t.Fatalf("%v", o.BatchIdleDuration)
			}
		}},
		{name: "bad duration names the setting", env: map[string]string{"BATCH_IDLE_DURATION": "soon"}, wantErr: `invalid setting BATCH_IDLE_DURATION (--batch-idle-duration, from env BATCH_IDLE_DURATION) "soon": want a non-negative duration`},
		{name: "bad port", args: []string{"--metrics-port=99999"}, wantErr: `invalid setting METRICS_PORT (--metrics-port, from flag --metrics-port) "99999": want an integer from 0 to 65535`},
		{name: "unknown provider", args: []string{"--cloud-provider=gcp"}, wantErr: "want one of kwok, aws"},
		{name: "unknown feature gate", env: map[string]string{"FEATURE_GATES": "Teleport=true"}, wantErr: `unknown feature gate "Teleport"`},
		{name: "max shorter than idle", env: map[string]string{"BATCH_MAX_DURATION": "1s", "BATCH_IDLE_DURATION": "5s"}, wantErr: "must not be shorter than BATCH_IDLE_DURATION"},
		{name: "aws needs a cluster name", args: []string{"--cloud-provider=aws"}, wantErr: "missing setting CLUSTER_NAME"},
		{name: "bad memory overhead names the setting", env: map[string]string{"VM_MEMORY_OVERHEAD_PERCENT": "7.5"}, wantErr: `invalid setting VM_MEMORY_OVERHEAD_PERCENT (--vm-memory-overhead-percent, from env VM_MEMORY_OVERHEAD_PERCENT) "7.5": want a fraction between 0 and 1`},
		{name: "bad reserved ENIs", env: map[string]string{"RESERVED_ENIS": "-1"}, wantErr: `invalid setting RESERVED_ENIS`},
		{name: "bad isolated VPC", env: map[string]string{"ISOLATED_VPC": "maybe"}, wantErr: `invalid setting ISOLATED_VPC`},
		{name: "aws settings default as Karpenter's", check: func(t *testing.T, o *Options) {
			if o.VMMemoryOverheadPercent != 0.075 || o.ReservedENIs != 0 || o.IsolatedVPC || o.EKSControlPlane {
				t.Fatalf("%+v", o)
			}
		}},
		{name: "an interruption queue needs aws", env: map[string]string{"INTERRUPTION_QUEUE": "demo"}, wantErr: `invalid setting INTERRUPTION_QUEUE "demo": interruption messages come from AWS`},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "want one of debug, info, error"},
		{name: "no instance profile collection interval", env: map[string]string{"INSTANCE_PROFILE_GC_INTERVAL": "0s"}, wantErr: "invalid setting INSTANCE_PROFILE_GC_INTERVAL 0s: must be positive"},
		{name: "commitments read too often", env: map[string]string{"COMMITMENTS_REFRESH_INTERVAL": "1s"}, wantErr: "invalid setting COMMITMENTS_REFRESH_INTERVAL 1s: must be at least 5s"},
		{name: "Karpenter's settings at the values Joiner implements", env: map[string]string{"ENABLE_ZONAL_SHIFT": "false", "IGNORE_DRA_REQUESTS": "true",
			"LOG_OUTPUT_PATHS": "stdout", "LOG_ERROR_OUTPUT_PATHS": "stderr", "DISABLE_DRY_RUN": "true", "AMI_REFRESH_INTERVAL": "24h", "SUBNET_REFRESH_INTERVAL": "5m"},
			check: func(t *testing.T, o *Options) {
				if o.AMIRefreshInterval != 24*time.Hour || o.SubnetRefreshInterval != 5*time.Minute {
					t.Fatalf("%+v", o)
				}
			}},
		{name: "refresh intervals default to Karpenter's", check: func(t *testing.T, o *Options) {
			if o.AMIRefreshInterval != time.Minute || o.SubnetRefreshInterval != time.Minute {
				t.Fatalf("%+v", o)
			}
		}},
		{name: "zonal shift needs the aws provider", env: map[string]string{"ENABLE_ZONAL_SHIFT": "true"}, wantErr: `invalid setting ENABLE_ZONAL_SHIFT true: zonal shifts are ARC's, on EKS clusters; it needs --cloud-provider=aws (or set it false)`},
		{name: "zonal shift on aws", env: map[string]string{"ENABLE_ZONAL_SHIFT": "true", "CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "demo"}, check: func(t *testing.T, o *Options) {
			if !o.EnableZonalShift {
				t.Fatalf("%+v", o)
			}
		}},
		{name: "DRA requests are refused", env: map[string]string{"IGNORE_DRA_REQUESTS": "false"}, wantErr: `invalid setting IGNORE_DRA_REQUESTS "false"`},
		{name: "log paths are refused", env: map[string]string{"LOG_OUTPUT_PATHS": "/var/log/joiner.log"}, wantErr: `invalid setting LOG_OUTPUT_PATHS "/var/log/joiner.log"`},
		{name: "error log paths are refused", env: map[string]string{"LOG_ERROR_OUTPUT_PATHS": "/var/log/joiner-errors.log"}, wantErr: `invalid setting LOG_ERROR_OUTPUT_PATHS "/var/log/joiner-errors.log"`},
		{name: "dry run off is accepted too", env: map[string]string{"DISABLE_DRY_RUN": "false"}, check: func(t *testing.T, o *Options) {}},
		{name: "a dry-run setting that is not a bool", env: map[string]string{"DISABLE_DRY_RUN": "maybe"}, wantErr: `invalid setting DISABLE_DRY_RUN "maybe"`},
		{name: "CPU requests and the minimum version as Karpenter's chart passes them", env: map[string]string{"CPU_REQUESTS": "1500", "KUBERNETES_MIN_VERSION": "1.19.0-0"},
			check: func(t *testing.T, o *Options) {
				if o.CPURequests != 1500 || o.KubernetesMinVersion != "1.19.0-0" {
					t.Fatalf("%+v", o)
				}
			}},
		{name: "a minimum version that is not one", env: map[string]string{"KUBERNETES_MIN_VERSION": "latest"}, wantErr: `invalid setting KUBERNETES_MIN_VERSION "latest"`},
		{name: "a refresh interval too short", env: map[string]string{"SUBNET_REFRESH_INTERVAL": "1s"}, wantErr: "invalid setting SUBNET_REFRESH_INTERVAL 1s: must be at least 5s"},
		{name: "an image refresh interval too short", env: map[string]string{"AMI_REFRESH_INTERVAL": "4s"}, wantErr: "invalid setting AMI_REFRESH_INTERVAL 4s: must be at least 5s"},
		{name: "policies default to Respect and Strict", check: func(t *testing.T, o *Options) {
			if s := o.Scheduling(); s.PreferencePolicy != scheduling.PreferencePolicyRespect || s.MinValuesPolicy != scheduling.MinValuesPolicyStrict {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "policies reach the solver", env: map[string]string{"PREFERENCE_POLICY": "ignore", "MIN_VALUES_POLICY": "BestEffort"}, check: func(t *testing.T, o *Options) {
			if s := o.Scheduling(); s.PreferencePolicy != scheduling.PreferencePolicyIgnore || s.MinValuesPolicy != scheduling.MinValuesPolicyBestEffort {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "bad preference policy", env: map[string]string{"PREFERENCE_POLICY": "Sometimes"},
			wantErr: `invalid setting PREFERENCE_POLICY (--preference-policy, from env PREFERENCE_POLICY) "Sometimes": want one of Respect, Ignore`},
		{name: "bad min values policy", args: []string{"--min-values-policy=Lenient"},
			wantErr: `invalid setting MIN_VALUES_POLICY (--min-values-policy, from flag --min-values-policy) "Lenient": want one of Strict, BestEffort`},
		{name: "Karpenter's Helm default gates carry over", env: map[string]string{"FEATURE_GATES": "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"},
			check: func(t *testing.T, o *Options) {
				if o.FeatureGates != (FeatureGates{ReservedCapacity: true}) {
					t.Fatalf("%+v", o.FeatureGates)
				}
			}},
		{name: "ReservedCapacity is on by default, as in Karpenter", check: func(t *testing.T, o *Options) {
			if o.FeatureGates != (FeatureGates{ReservedCapacity: true}) {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "gates that leave ReservedCapacity out keep it on", env: map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=true"}, check: func(t *testing.T, o *Options) {
			if !o.FeatureGates.ReservedCapacity {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "ReservedCapacity turns off", env: map[string]string{"FEATURE_GATES": "ReservedCapacity=false"}, check: func(t *testing.T, o *Options) {
			if o.FeatureGates.ReservedCapacity {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "NodeRepair is available", env: map[string]string{"FEATURE_GATES": "NodeRepair=true"}, check: func(t *testing.T, o *Options) {
			if !o.FeatureGates.NodeRepair {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "NodeOverlay is available", env: map[string]string{"FEATURE_GATES": "NodeOverlay=true"}, check: func(t *testing.T, o *Options) {
			if !o.FeatureGates.NodeOverlay {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "StaticCapacity is available", args: []string{"--feature-gates=SpotToSpotConsolidation=true,StaticCapacity=true"}, check: func(t *testing.T, o *Options) {
			if !o.FeatureGates.StaticCapacity || !o.FeatureGates.SpotToSpotConsolidation {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "CapacityBuffer is available", env: map[string]string{"FEATURE_GATES": "CapacityBuffer=true"}, check: func(t *testing.T, o *Options) {
			if !o.FeatureGates.CapacityBuffer {
				t.Fatalf("%+v", o.FeatureGates)
			}
		}},
		{name: "a gate needs a bool", env: map[string]string{"FEATURE_GATES": "NodeRepair=maybe"}, wantErr: `feature gate "NodeRepair" needs =true or =false`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// joiner plan takes the policies from the same flags and variables, and
// nothing else the controller reads can stop it.
func TestParsePlanning(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    scheduling.Options
		wantErr string
	}{
		{name: "defaults", want: scheduling.Options{PreferencePolicy: scheduling.PreferencePolicyRespect, MinValuesPolicy: scheduling.MinValuesPolicyStrict}},
		{name: "env", env: map[string]string{"PREFERENCE_POLICY": "Ignore", "MIN_VALUES_POLICY": "BestEffort"},
			want: scheduling.Options{PreferencePolicy: scheduling.PreferencePolicyIgnore, MinValuesPolicy: scheduling.MinValuesPolicyBestEffort}},
		{name: "flag wins", args: []string{"--min-values-policy=Strict"}, env: map[string]string{"MIN_VALUES_POLICY": "BestEffort"},
			want: scheduling.Options{PreferencePolicy: scheduling.PreferencePolicyRespect, MinValuesPolicy: scheduling.MinValuesPolicyStrict}},
		{name: "other settings do not matter", env: map[string]string{"BATCH_IDLE_DURATION": "soon", "CLOUD_PROVIDER": "aws"},
			want: scheduling.Options{PreferencePolicy: scheduling.PreferencePolicyRespect, MinValuesPolicy: scheduling.MinValuesPolicyStrict}},
		{name: "bad value", args: []string{"--preference-policy=Never"}, wantErr: `invalid setting PREFERENCE_POLICY (--preference-policy, from flag --preference-policy) "Never": want one of Respect, Ignore`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePlanning(tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%+v, %v", got, err)
			}
		})
	}
}

func TestCheckServerVersion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"33","gitVersion":"v1.33.13"}`)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	for _, tt := range []struct {
		min     string
		wantErr string
	}{
		{"", ""},
		{"1.19.0-0", ""}, // Karpenter's chart's value
		{"1.33.13", ""},
		{"1.34.0", "older than KUBERNETES_MIN_VERSION 1.34.0"},
	} {
		err := checkServerVersion(cfg, tt.min)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("min %q: %v, want %q", tt.min, err, tt.wantErr)
		}
	}
}
