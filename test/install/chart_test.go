package install

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLint(t *testing.T) {
	for _, name := range []string{"joiner", "joiner-crd"} {
		t.Run(name, func(t *testing.T) {
			if out, err := helm(t, "lint", "--strict", chart(name)); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
		})
	}
}

// env is the controller container's environment as a map (value or the
// downward API's field).
func env(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			out[e.Name] = "resourceFieldRef:" + e.ValueFrom.ResourceFieldRef.Resource
		default:
			out[e.Name] = e.Value
		}
	}
	return out
}

// Each guide's helm flags and values render to what they ask for.
func TestGuideValues(t *testing.T) {
	type rendered struct {
		deploy *appsv1.Deployment
		sa     *corev1.ServiceAccount
		all    map[string]any
	}
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, r rendered)
	}{{
		// Guide 000 (Karpenter v1.1.3's getting started): IRSA, settings,
		// resources, in kube-system.
		name: "getting started: IRSA, settings and resources",
		args: []string{"--set", `serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::111122223333:role/demo-karpenter`,
			"--set", "settings.clusterName=demo", "--set", "settings.clusterEndpoint=https://ABC.gr7.us-east-1.eks.amazonaws.com",
			"--set", "settings.interruptionQueue=demo",
			"--set", "controller.resources.requests.cpu=1", "--set", "controller.resources.requests.memory=1Gi",
			"--set", "controller.resources.limits.cpu=1", "--set", "controller.resources.limits.memory=1Gi"},
		check: func(t *testing.T, r rendered) {
			if got := r.sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::111122223333:role/demo-karpenter" {
				t.Errorf("role annotation %q", got)
			}
			if r.sa.Name != "karpenter" || r.deploy.Spec.Template.Spec.ServiceAccountName != "karpenter" {
				t.Errorf("service account %q, pod's %q; want the guide's karpenter", r.sa.Name, r.deploy.Spec.Template.Spec.ServiceAccountName)
			}
			c := r.deploy.Spec.Template.Spec.Containers[0]
			e := env(c)
			for k, v := range map[string]string{"CLUSTER_NAME": "demo", "CLUSTER_ENDPOINT": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
				"INTERRUPTION_QUEUE": "demo", "CLOUD_PROVIDER": "aws", "SYSTEM_NAMESPACE": "fieldRef:metadata.namespace",
				"MEMORY_LIMIT": "resourceFieldRef:limits.memory", "CPU_REQUESTS": "resourceFieldRef:requests.cpu", "KUBERNETES_MIN_VERSION": "1.19.0-0",
				"BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "10s",
				"FEATURE_GATES": "CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,StaticCapacity=false"} {
				if e[k] != v {
					t.Errorf("env %s=%q, want %q", k, e[k], v)
				}
			}
			want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			if !reflect.DeepEqual(c.Resources.Requests, want) || !reflect.DeepEqual(c.Resources.Limits, want) {
				t.Errorf("resources %+v", c.Resources)
			}
			if *r.deploy.Spec.Replicas != 2 {
				t.Errorf("replicas %d, want Karpenter's default 2", *r.deploy.Spec.Replicas)
			}
			aff := r.deploy.Spec.Template.Spec.Affinity
			if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "karpenter.sh/nodepool" {
				t.Errorf("default affinity must keep the controller off karpenter.sh/nodepool nodes: %+v", aff)
			}
			if sel := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector; sel == nil || sel.MatchLabels["app.kubernetes.io/name"] != "joiner" {
				t.Errorf("the hostname anti-affinity must select the chart's pods: %+v", sel)
			}
		},
	}, {
		// Guide 001: a values file with one replica and the controller
		// pinned to a node group.
		name: "values file: replicas 1 and a node group affinity",
		args: []string{"-f", "testdata/guide001-values.yaml"},
		check: func(t *testing.T, r rendered) {
			if *r.deploy.Spec.Replicas != 1 {
				t.Errorf("replicas %d", *r.deploy.Spec.Replicas)
			}
			terms := r.deploy.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 2 || terms[0].MatchExpressions[1].Values[0] != "default_node_group" {
				t.Errorf("node affinity %+v", terms)
			}
			if _, ok := r.all["PodDisruptionBudget/karpenter"]; ok {
				t.Error("one replica gets no PDB: it would block every node drain")
			}
		},
	}, {
		// Guide 002: its own namespace and service account, a mirrored
		// image.
		name: "mirrored image and an existing service account",
		args: []string{"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=karpenter-sa",
			"--set", "controller.image.repository=111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/joiner", "--set", "controller.image.tag=v0.1.0",
			"--set", "settings.clusterName=demo"},
		check: func(t *testing.T, r rendered) {
			if r.sa != nil {
				t.Error("serviceAccount.create=false must not create one")
			}
			spec := r.deploy.Spec.Template.Spec
			if spec.ServiceAccountName != "karpenter-sa" {
				t.Errorf("service account %q", spec.ServiceAccountName)
			}
			if img := spec.Containers[0].Image; img != "111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/joiner:v0.1.0" {
				t.Errorf("image %q", img)
			}
		},
	}, {
		name: "a digest wins over the tag",
		args: []string{"--set", "controller.image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "--set", "controller.image.tag=v9"},
		check: func(t *testing.T, r rendered) {
			if img := r.deploy.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, "/joiner@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
				t.Errorf("image %q", img)
			}
		},
	}, {
		name:  "Karpenter's AWS gate at its default",
		args:  []string{"--set", "settings.awsFeatureGates.nodeClassCEL=false"},
		check: func(t *testing.T, r rendered) {},
	}, {
		name: "the refresh intervals carry over",
		args: []string{"--set", "settings.amiRefreshInterval=24h", "--set", "settings.subnetRefreshInterval=5m"},
		check: func(t *testing.T, r rendered) {
			e := env(r.deploy.Spec.Template.Spec.Containers[0])
			if e["AMI_REFRESH_INTERVAL"] != "24h" || e["SUBNET_REFRESH_INTERVAL"] != "5m" {
				t.Errorf("AMI_REFRESH_INTERVAL %q, SUBNET_REFRESH_INTERVAL %q", e["AMI_REFRESH_INTERVAL"], e["SUBNET_REFRESH_INTERVAL"])
			}
		},
	}, {
		name: "cluster-state observability can be turned off",
		args: []string{"--set", "settings.disableClusterStateObservability=true"},
		check: func(t *testing.T, r rendered) {
			if got := env(r.deploy.Spec.Template.Spec.Containers[0])["DISABLE_CLUSTER_STATE_OBSERVABILITY"]; got != "true" {
				t.Errorf("DISABLE_CLUSTER_STATE_OBSERVABILITY %q", got)
			}
		},
	}, {
		name: "the v1.14 guide's zonal shift setting",
		args: []string{"--set", "settings.enableZonalShift=true"},
		check: func(t *testing.T, r rendered) {
			if got := env(r.deploy.Spec.Template.Spec.Containers[0])["ENABLE_ZONAL_SHIFT"]; got != "true" {
				t.Errorf("ENABLE_ZONAL_SHIFT %q", got)
			}
		},
	}, {
		name: "feature gates carry over as FEATURE_GATES",
		args: []string{"--set", "settings.featureGates.spotToSpotConsolidation=true", "--set", "settings.featureGates.nodeRepair=true"},
		check: func(t *testing.T, r rendered) {
			if got := env(r.deploy.Spec.Template.Spec.Containers[0])["FEATURE_GATES"]; got != "CapacityBuffer=false,NodeOverlay=false,NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=true,StaticCapacity=false" {
				t.Errorf("FEATURE_GATES %q", got)
			}
		},
	}, {
		name: "pod, scheduling and metrics keys",
		args: []string{"--set", "priorityClassName=high", "--set", "hostNetwork=true", "--set", "dnsPolicy=Default",
			"--set", "podAnnotations.team=infra", "--set", "additionalLabels.env=prod", "--set", "imagePullSecrets[0].name=regcred",
			"--set", "nodeSelector.pool=system", "--set", "tolerations[0].key=dedicated", "--set", "tolerations[0].operator=Exists",
			"--set", "fullnameOverride=autoscaler", "--set", "controller.metrics.port=9090", "--set", "podDisruptionBudget.maxUnavailable=0"},
		check: func(t *testing.T, r rendered) {
			spec := r.deploy.Spec.Template.Spec
			if r.deploy.Name != "autoscaler" || spec.PriorityClassName != "high" || !spec.HostNetwork || spec.DNSPolicy != corev1.DNSDefault ||
				r.deploy.Spec.Template.Annotations["team"] != "infra" || r.deploy.Labels["env"] != "prod" || spec.ImagePullSecrets[0].Name != "regcred" ||
				spec.NodeSelector["pool"] != "system" || spec.Tolerations[0].Key != "dedicated" {
				t.Errorf("deployment %+v", r.deploy)
			}
			if e := env(spec.Containers[0]); e["METRICS_PORT"] != "9090" || spec.Containers[0].Ports[0].ContainerPort != 9090 {
				t.Errorf("metrics port: env %q, container %d", e["METRICS_PORT"], spec.Containers[0].Ports[0].ContainerPort)
			}
			pdb, ok := r.all["PodDisruptionBudget/autoscaler"].(*policyv1.PodDisruptionBudget)
			if !ok || pdb.Spec.MaxUnavailable.IntValue() != 0 {
				t.Errorf("PDB %+v", r.all["PodDisruptionBudget/autoscaler"])
			}
			svc, ok := r.all["Service/autoscaler"].(*corev1.Service)
			if !ok || svc.Spec.Ports[0].Port != 9090 || svc.Spec.Ports[0].Name != "http-metrics" {
				t.Errorf("metrics Service %+v", r.all["Service/autoscaler"])
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			r := rendered{all: map[string]any{}}
			for k, o := range objs {
				r.all[k] = o
				switch o := o.(type) {
				case *appsv1.Deployment:
					r.deploy = o
				case *corev1.ServiceAccount:
					r.sa = o
				}
			}
			if r.deploy == nil {
				t.Fatalf("no Deployment in\n%s", out)
			}
			tc.check(t, r)
		})
	}
}

// A value Joiner cannot honour fails the render, naming the key and the
// fix; nothing is dropped silently. Keys Karpenter's chart ignores are not
// refused (TestUnusedValuesAreNamed).
func TestRefusedValues(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		want []string
	}{
		{"an empty cluster name, Karpenter's message", []string{"settings.clusterName="}, []string{"Chart cannot be installed without a valid settings.clusterName!"}},
		{"pre-v1 settings.aws key instead of the name", []string{"settings.clusterName=", "settings.aws.clusterName=demo"}, []string{"settings.aws.clusterName", "settings.clusterName"}},
		{"pre-v0.19 top-level clusterName instead of the name", []string{"settings.clusterName=", "clusterName=demo"}, []string{"clusterName", "settings.clusterName"}},
		{"a gate that is not a bool", []string{"settings.clusterName=demo", "settings.featureGates.nodeRepair=yes"}, []string{"settings.featureGates.nodeRepair", "true or false"}},
		{"a log level the binary lacks", []string{"settings.clusterName=demo", "logLevel=warn"}, []string{"logLevel", "debug, info or error"}},
		{"log output paths", []string{"settings.clusterName=demo", "logOutputPaths[0]=/var/log/joiner.log"}, []string{"logOutputPaths", "stdout"}},
		{"an existing service account without a name", []string{"settings.clusterName=demo", "serviceAccount.create=false"}, []string{"serviceAccount.name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := render(t, args...)
			if err == nil {
				t.Fatalf("--set %v rendered; want a failure naming %v", tc.set, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Keys Karpenter v1.14.1's chart ignores (a typo, its older keys, pre-v1
// settings beside a v1 clusterName) install Joiner as they install
// Karpenter, and the release notes name each as not used, with its v1 home
// where it has one.
func TestUnusedValuesAreNamed(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`settings:
  clusterName: demo
  clusterNmae: typo
  aws: {interruptionQueueName: demo, defaultInstanceProfile: KarpenterNodeInstanceProfile}
  featureGates: {fastLaunch: true, driftEnabled: true}
  awsFeatureGates: {someGate: true, nodeClassCEL: true}
  ignoreDRARequests: false
webhook: {enabled: true, port: 8443}
postInstallHook: {image: {tag: v1.0.0}}
logConfig: {enabled: true}
clusterEndpoint: https://example
controler: {resources: {}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "install", "karpenter", chart("joiner"), "--namespace", "kube-system", "--dry-run=client", "-f", values)
	if err != nil {
		t.Fatalf("helm install --dry-run with keys Karpenter's chart ignores: %v\n%s", err, out)
	}
	notes := out[strings.Index(out, "NOTES:"):]
	for _, want := range []string{
		"- settings.clusterNmae: not a setting of Karpenter v1.14.1 or Joiner",
		"- settings.aws.interruptionQueueName: Karpenter's pre-v1 key; in v1 it is settings.interruptionQueue",
		"- settings.aws.defaultInstanceProfile: Karpenter's pre-v1 key; in v1 it is spec.role or spec.instanceProfile",
		"- settings.featureGates.fastLaunch: not a feature gate",
		"- settings.featureGates.driftEnabled: Karpenter's pre-v1 gate",
		"- settings.awsFeatureGates.someGate: not a value of Karpenter v1.14.1's chart",
		"- settings.awsFeatureGates.nodeClassCEL: not a value of Karpenter v1.14.1's chart; Joiner's EC2NodeClass validation is its CRD's CEL rules already",
		"- settings.ignoreDRARequests=false: Karpenter's chart drops a false value too",
		"- webhook: Karpenter's conversion webhook",
		"- postInstallHook: Karpenter's post-install hook",
		"- logConfig: Karpenter's pre-v0.32 logging block",
		"- clusterEndpoint: Karpenter's pre-v0.19 key",
		"- controler: not a value of Karpenter v1.14.1's chart or Joiner's (a typo?)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("the release notes lack %q:\n%s", want, notes)
		}
	}
	// A values file with none of these says nothing of the kind.
	out, err = helm(t, "install", "karpenter", chart("joiner"), "--namespace", "kube-system", "--dry-run=client", "--set", "settings.clusterName=demo")
	if err != nil || strings.Contains(out, "not used") {
		t.Errorf("plain install: %v\n%s", err, out[strings.Index(out, "NOTES:"):])
	}
}

// Karpenter v1.14.1's own values.yaml, with the guide's --set flags,
// installs Joiner: every key of it is accepted. Its settings are
// tpl-evaluated as Karpenter's chart evaluates them, and an integer
// terminationGracePeriodSeconds (what --set makes) is rendered.
func TestKarpenterValuesInstall(t *testing.T) {
	karpenterValues := filepath.Join(filepath.Dir(karpenterCRDChart(t)), "karpenter", "values.yaml")
	// Templates in a values file: --set reads braces as a list.
	templated := filepath.Join(t.TempDir(), "templated.yaml")
	if err := os.WriteFile(templated, []byte("settings:\n  clusterName: '{{ .Release.Name }}-demo'\n  interruptionQueue: '{{ .Release.Name }}-queue'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := render(t, "-f", karpenterValues, "-f", templated, "--set", "terminationGracePeriodSeconds=60")
	if err != nil {
		t.Fatalf("Karpenter v1.14.1's values.yaml: %v", err)
	}
	for _, want := range []string{"value: \"karpenter-demo\"", "value: \"karpenter-queue\"", "terminationGracePeriodSeconds: 60"} {
		if !strings.Contains(out, want) {
			t.Errorf("the render lacks %s", want)
		}
	}
}

// A gated feature's RBAC comes with its gate alone, so a cluster that
// leaves it off grants nothing for it.
func TestGatedRBAC(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		resource string
		want     bool
	}{
		{"NodeOverlays with the gate", []string{"--set", "settings.featureGates.nodeOverlay=true"}, "nodeoverlays/status", true},
		{"NodeOverlays without it", nil, "nodeoverlays", false},
		{"CapacityBuffers with the gate", []string{"--set", "settings.featureGates.capacityBuffer=true"}, "capacitybuffers/status", true},
		{"CapacityBuffers without it", nil, "capacitybuffers", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "resources: ["+tc.resource+"]"); got != tc.want {
				t.Errorf("the ClusterRole grants %s: %v, want %v", tc.resource, got, tc.want)
			}
		})
	}
}

// As Karpenter's chart: a ServiceMonitor only where the Prometheus
// Operator's API is served, and the NodePool, NodeClaim and EC2NodeClass
// verbs aggregated into the built-in admin role.
func TestServiceMonitorAndAdminRole(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"serviceMonitor.enabled without the Prometheus Operator", []string{"--set", "serviceMonitor.enabled=true"}, false},
		{"serviceMonitor.enabled with it", []string{"--set", "serviceMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1"}, true},
		{"the Prometheus Operator without serviceMonitor.enabled", []string{"--api-versions", "monitoring.coreos.com/v1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "kind: ServiceMonitor"); got != tc.want {
				t.Errorf("a ServiceMonitor rendered: %v, want %v", got, tc.want)
			}
		})
	}
	out, err := render(t)
	if err != nil {
		t.Fatal(err)
	}
	role, ok := objects(t, out)["ClusterRole/karpenter-admin"].(*rbacv1.ClusterRole)
	if !ok {
		t.Fatal("no ClusterRole karpenter-admin")
	}
	if role.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" {
		t.Errorf("karpenter-admin's labels %v: not aggregated to admin", role.Labels)
	}
	granted := map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted[r.APIGroups[0]+"/"+res+":"+v] = true
			}
		}
	}
	for _, want := range []string{"karpenter.sh/nodepools:create", "karpenter.sh/nodeclaims:delete", "karpenter.k8s.aws/ec2nodeclasses:patch", "karpenter.sh/nodepools/status:get"} {
		if !granted[want] {
			t.Errorf("karpenter-admin does not grant %s", want)
		}
	}
}
