package operator

import (
	"strings"
	"testing"
	"time"
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
			if o.BatchIdleDuration != time.Second || o.BatchMaxDuration != 10*time.Second || o.CloudProvider != "kwok" || o.MetricsPort != 8080 || o.HealthProbePort != 8081 {
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
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "want one of debug, info, error"},
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
