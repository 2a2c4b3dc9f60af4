package amifamily

import (
	"encoding/base64"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func ptr[T any](v T) *T { return &v }

// baseInput is a node of the guides' cluster: a spot node of the default
// pool with one NodePool taint and one startup taint.
func baseInput() Input {
	return Input{
		ClusterName:     "demo",
		ClusterEndpoint: "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com",
		CABundle:        base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIBdemo\n-----END CERTIFICATE-----\n")),
		ClusterCIDR:     "10.100.0.0/16",
		ClusterDNS:      []string{"10.100.0.10"},
		Labels: map[string]string{
			"karpenter.sh/nodepool":          "default",
			"karpenter.sh/capacity-type":     "spot",
			"karpenter.k8s.aws/ec2nodeclass": "default",
			"team":                           "payments",
			// The kubelet may not set node-role labels on itself.
			"node-role.kubernetes.io/worker": "",
			"node.kubernetes.io/lifecycle":   "spot",
		},
		Taints:        []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
		StartupTaints: []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}},
		Kubelet: &awsv1.KubeletConfiguration{
			KubeReserved:   map[string]string{"cpu": "70m", "memory": "442Mi", "ephemeral-storage": "1Gi"},
			SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi"},
			EvictionHard:   map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		},
		MaxPods: 29,
	}
}

// fullKubelet sets every kubelet field the class offers.
func fullKubelet(in Input) Input {
	in.Kubelet = &awsv1.KubeletConfiguration{
		ClusterDNS:                  []string{"169.254.20.10"},
		MaxPods:                     ptr(int32(110)),
		PodsPerCore:                 ptr(int32(10)),
		KubeReserved:                map[string]string{"cpu": "200m", "memory": "1Gi"},
		SystemReserved:              map[string]string{"cpu": "100m", "memory": "256Mi", "pid": "1000"},
		EvictionHard:                map[string]string{"memory.available": "5%", "nodefs.available": "10%"},
		EvictionSoft:                map[string]string{"memory.available": "10%"},
		EvictionSoftGracePeriod:     map[string]metav1.Duration{"memory.available": {Duration: 90 * time.Second}},
		EvictionMaxPodGracePeriod:   ptr(int32(60)),
		ImageGCHighThresholdPercent: ptr(int32(85)),
		ImageGCLowThresholdPercent:  ptr(int32(80)),
		CPUCFSQuota:                 ptr(false),
	}
	return in
}

func raid0(in Input) Input {
	in.InstanceStoreRAID0 = true
	return in
}

func withUserData(in Input, s string) Input {
	in.CustomUserData = &s
	return in
}

const (
	shellScript    = "#!/bin/bash\necho \"tuning sysctls\"\nsysctl -w vm.max_map_count=262144\n"
	userNodeConfig = `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
      featureGates:
        DisableKubeletCloudCredentialProviders: true
`
	userMIME = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0
--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "user part two"
--BOUNDARY--
`
	userTOML = `[settings.kubernetes]
cluster-name = "replaced"
max-pods = 500
cloud-provider = "external"
allowed-unsafe-sysctls = ["net.core.somaxconn"]

[settings.kubernetes.node-labels]
"team" = "overridden-by-joiner"
"user-label" = "kept"

[settings.kubernetes.node-taints]
"user-taint" = ["x:NoSchedule"]

[settings.autoscaling]
should-wait = true

[settings.ntp]
time-servers = ["169.254.169.123"]
`
	// userTOMLBootstrap has a bootstrap command of the user's, which the
	// instance store's must join, not replace.
	userTOMLBootstrap = `[settings.bootstrap-commands.100-sysctl]
commands = [["sysctl", "-w", "vm.max_map_count=262144"]]
mode = "always"
essential = false
`
	userPowerShell = "<powershell>\nWrite-Host \"user script\"\n</powershell>"
)

func TestUserDataGolden(t *testing.T) {
	cases := []struct {
		name   string
		family string
		in     Input
	}{
		{"al2023", awsv1.AMIFamilyAL2023, baseInput()},
		{"al2023_kubelet", awsv1.AMIFamilyAL2023, fullKubelet(baseInput())},
		{"al2023_shell_merged", awsv1.AMIFamilyAL2023, withUserData(baseInput(), shellScript)},
		{"al2023_nodeconfig_merged", awsv1.AMIFamilyAL2023, withUserData(baseInput(), userNodeConfig)},
		{"al2023_mime_merged", awsv1.AMIFamilyAL2023, withUserData(baseInput(), userMIME)},
		{"al2", awsv1.AMIFamilyAL2, baseInput()},
		{"al2_kubelet", awsv1.AMIFamilyAL2, fullKubelet(baseInput())},
		{"al2_shell_merged", awsv1.AMIFamilyAL2, withUserData(baseInput(), shellScript)},
		{"al2_mime_merged", awsv1.AMIFamilyAL2, withUserData(baseInput(), userMIME)},
		{"bottlerocket", awsv1.AMIFamilyBottlerocket, baseInput()},
		{"bottlerocket_kubelet", awsv1.AMIFamilyBottlerocket, fullKubelet(baseInput())},
		{"bottlerocket_toml_merged", awsv1.AMIFamilyBottlerocket, withUserData(baseInput(), userTOML)},
		{"windows2022", awsv1.AMIFamilyWindows2022, baseInput()},
		{"windows2022_merged", awsv1.AMIFamilyWindows2022, withUserData(baseInput(), userPowerShell)},
		{"custom", awsv1.AMIFamilyCustom, withUserData(baseInput(), shellScript)},
		{"al2023_raid0", awsv1.AMIFamilyAL2023, raid0(baseInput())},
		{"al2_raid0", awsv1.AMIFamilyAL2, raid0(baseInput())},
		{"bottlerocket_raid0", awsv1.AMIFamilyBottlerocket, raid0(withUserData(baseInput(), userTOMLBootstrap))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			encoded, err := UserData(tc.family, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				t.Fatalf("user data is not base64: %v", err)
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if string(raw) != string(want) {
				t.Errorf("user data differs from %s (go test -update rewrites it; review the diff):\n--- got\n%s\n--- want\n%s", path, raw, want)
			}
			again, err := UserData(tc.family, tc.in)
			if err != nil || again != encoded {
				t.Errorf("a second call gave different user data; launch template names would churn")
			}
		})
	}
}

// TestUserDataDecodes reads the generated documents back as the node would,
// so that a golden file accepted by eye is also checked by parser.
func TestUserDataDecodes(t *testing.T) {
	decode := func(t *testing.T, family string, in Input) string {
		t.Helper()
		encoded, err := UserData(family, in)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.StdEncoding.DecodeString(encoded)
		return string(raw)
	}

	t.Run("al2023 nodeadm config is last and carries the node", func(t *testing.T) {
		parts, err := parseMIME(decode(t, awsv1.AMIFamilyAL2023, withUserData(baseInput(), userMIME)))
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 3 || parts[0].contentType != ContentTypeNodeConfig || parts[1].contentType != ContentTypeShellScript {
			t.Fatalf("want the user's two parts first, then ours; got %+v", parts)
		}
		last := parts[2]
		if last.contentType != ContentTypeNodeConfig {
			t.Fatalf("last part is %s", last.contentType)
		}
		var nc struct {
			Kind string
			Spec struct {
				Cluster struct{ Name, APIServerEndpoint, CertificateAuthority, CIDR string }
				Kubelet struct {
					Config struct {
						MaxPods            int
						ClusterDNS         []string
						KubeReserved       map[string]string
						RegisterWithTaints []corev1.Taint
					}
					Flags []string
				}
			}
		}
		if err := yaml.Unmarshal([]byte(last.content), &nc); err != nil {
			t.Fatal(err)
		}
		in := baseInput()
		c := nc.Spec.Cluster
		if nc.Kind != "NodeConfig" || c.Name != "demo" || c.APIServerEndpoint != in.ClusterEndpoint || c.CertificateAuthority != in.CABundle || c.CIDR != "10.100.0.0/16" {
			t.Errorf("cluster details: %+v", nc)
		}
		k := nc.Spec.Kubelet
		if k.Config.MaxPods != 29 || len(k.Config.ClusterDNS) != 1 || k.Config.KubeReserved["memory"] != "442Mi" || len(k.Config.RegisterWithTaints) != 2 {
			t.Errorf("kubelet config: %+v", k.Config)
		}
		if len(k.Flags) != 1 || strings.Contains(k.Flags[0], "node-role") || !strings.Contains(k.Flags[0], "karpenter.sh/nodepool=default") {
			t.Errorf("flags: %v", k.Flags)
		}
	})

	t.Run("bottlerocket keeps the user's keys and sets the node's", func(t *testing.T) {
		var doc struct {
			Settings struct {
				Kubernetes  map[string]any
				Autoscaling map[string]any
				NTP         map[string]any `toml:"ntp"`
			}
		}
		if err := toml.Unmarshal([]byte(decode(t, awsv1.AMIFamilyBottlerocket, withUserData(baseInput(), userTOML))), &doc); err != nil {
			t.Fatal(err)
		}
		k := doc.Settings.Kubernetes
		labels, _ := k["node-labels"].(map[string]any)
		taints, _ := k["node-taints"].(map[string]any)
		switch {
		case k["cluster-name"] != "demo", k["max-pods"] != int64(29), k["cloud-provider"] != "external":
			t.Errorf("kubernetes settings: %v", k)
		case labels["user-label"] != "kept", labels["team"] != "payments", labels["node-role.kubernetes.io/worker"] != nil:
			t.Errorf("labels: %v", labels)
		case taints["user-taint"] != nil, taints["dedicated"] == nil, taints["node.cilium.io/agent-not-ready"] == nil:
			t.Errorf("taints: %v", taints)
		case doc.Settings.Autoscaling["should-wait"] != false, doc.Settings.NTP["time-servers"] == nil:
			t.Errorf("other settings: %+v", doc.Settings)
		}
	})

	t.Run("al2 runs the user's script before bootstrap.sh", func(t *testing.T) {
		parts, err := parseMIME(decode(t, awsv1.AMIFamilyAL2, withUserData(baseInput(), shellScript)))
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 2 || parts[0].content != shellScript || !strings.Contains(parts[1].content, "/etc/eks/bootstrap.sh 'demo'") {
			t.Fatalf("parts: %+v", parts)
		}
		for _, want := range []string{"--max-pods=29", `--register-with-taints=dedicated=payments:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute`, "--dns-cluster-ip '10.100.0.10'", "--use-max-pods false"} {
			if !strings.Contains(parts[1].content, want) {
				t.Errorf("bootstrap script lacks %s:\n%s", want, parts[1].content)
			}
		}
	})
}

func TestUserDataRules(t *testing.T) {
	cases := []struct {
		name    string
		family  string
		in      func(Input) Input
		want    []string
		notWant []string
	}{{
		name:    "the class's maxPods wins over the computed one",
		family:  awsv1.AMIFamilyAL2,
		in:      func(in Input) Input { in.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr(int32(58))}; return in },
		want:    []string{"--max-pods=58"},
		notWant: []string{"--max-pods=29"},
	}, {
		name:    "no max pods leaves bootstrap.sh its own",
		family:  awsv1.AMIFamilyAL2,
		in:      func(in Input) Input { in.MaxPods = 0; return in },
		notWant: []string{"--max-pods", "--use-max-pods"},
	}, {
		name:   "the class's clusterDNS wins over the cluster's",
		family: awsv1.AMIFamilyAL2023,
		in: func(in Input) Input {
			in.Kubelet = &awsv1.KubeletConfiguration{ClusterDNS: []string{"169.254.20.10"}}
			return in
		},
		want:    []string{"- 169.254.20.10"},
		notWant: []string{"10.100.0.10"},
	}, {
		name:   "an IPv6 cluster DNS tells bootstrap.sh the IP family",
		family: awsv1.AMIFamilyAL2,
		in:     func(in Input) Input { in.ClusterDNS = []string{"fd00::a"}; return in },
		want:   []string{"--ip-family ipv6", "--dns-cluster-ip 'fd00::a'"},
	}, {
		name:   "a taint repeated as a startup taint is registered once",
		family: awsv1.AMIFamilyAL2,
		in: func(in Input) Input {
			in.StartupTaints = append(in.StartupTaints, in.Taints...)
			return in
		},
		want:    []string{`--register-with-taints=dedicated=payments:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute`},
		notWant: []string{"NoSchedule,dedicated"},
	}, {
		name:    "labels the kubelet may not set are left out, node.kubernetes.io ones kept",
		family:  awsv1.AMIFamilyAL2,
		want:    []string{"node.kubernetes.io/lifecycle=spot", "team=payments"},
		notWant: []string{"node-role.kubernetes.io"},
	}, {
		name:    "a quote in a value cannot break out of the shell argument",
		family:  awsv1.AMIFamilyAL2,
		in:      func(in Input) Input { in.ClusterName = "de'mo"; return in },
		want:    []string{`/etc/eks/bootstrap.sh 'de'\''mo'`},
		notWant: []string{`'de'mo'`},
	}, {
		name:   "custom without user data is empty",
		family: awsv1.AMIFamilyCustom,
		in:     func(in Input) Input { in.CustomUserData = nil; return in },
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			if tc.in != nil {
				in = tc.in(in)
			}
			encoded, err := UserData(tc.family, in)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := base64.StdEncoding.DecodeString(encoded)
			for _, w := range tc.want {
				if !strings.Contains(string(raw), w) {
					t.Errorf("user data lacks %q:\n%s", w, raw)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(raw), w) {
					t.Errorf("user data has %q:\n%s", w, raw)
				}
			}
		})
	}
}

func TestUserDataErrors(t *testing.T) {
	cases := []struct {
		name     string
		family   string
		userData string
		in       func(Input) Input
		want     string
	}{
		{"al2023 MIME without boundary", awsv1.AMIFamilyAL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nbody\n", nil, "spec.userData: not a valid MIME multi-part archive: the multipart Content-Type header names no boundary"},
		{"al2023 MIME that is not multipart", awsv1.AMIFamilyAL2023, "Content-Type: text/plain\n\nhello\n", nil, "spec.userData: not a valid MIME multi-part archive: the MIME document is text/plain, not multipart/mixed"},
		{"al2023 MIME with no parts", awsv1.AMIFamilyAL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"X\"\n\nno delimiters here\n", nil, "spec.userData: not a valid MIME multi-part archive:"},
		{"al2023 MIME with a broken NodeConfig part", awsv1.AMIFamilyAL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"X\"\n\n--X\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n  bad: [indent\n--X--\n", nil, "spec.userData: MIME part 1 (application/node.eks.aws): NodeConfig is not valid YAML"},
		{"al2023 YAML that is not YAML", awsv1.AMIFamilyAL2023, "kind: NodeConfig\n  spec: [unclosed\n", nil, "spec.userData: for AL2023 it must be a MIME multi-part archive, a shell script starting with #!, or a nodeadm NodeConfig: NodeConfig is not valid YAML"},
		{"al2023 YAML of another kind", awsv1.AMIFamilyAL2023, "apiVersion: v1\nkind: ConfigMap\n", nil, `expected apiVersion node.eks.aws/v1alpha1 and kind NodeConfig, got apiVersion "v1" and kind "ConfigMap"`},
		{"al2 broken MIME", awsv1.AMIFamilyAL2, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"X\"\n\n--X\nContent-Type text/x-shellscript\n\n#!/bin/bash\n--X--\n", nil, "spec.userData: not a valid MIME multi-part archive"},
		{"bottlerocket bad TOML", awsv1.AMIFamilyBottlerocket, "[settings.kubernetes\nmax-pods = 3\n", nil, "spec.userData: not valid TOML for Bottlerocket at line 1, column 21: toml: expected character ]"},
		{"bottlerocket settings.kubernetes not a table", awsv1.AMIFamilyBottlerocket, "[settings]\nkubernetes = 3\n", nil, "spec.userData: settings.kubernetes must be a TOML table, got int64"},
		{"bottlerocket node-labels not a table", awsv1.AMIFamilyBottlerocket, "[settings.kubernetes]\nnode-labels = \"a=b\"\n", nil, "spec.userData: settings.kubernetes.node-labels must be a TOML table, got string"},
		{"a CA bundle that is not base64", awsv1.AMIFamilyAL2023, "", func(in Input) Input { in.CABundle = "not base64!"; return in }, "the cluster CA bundle (CLUSTER_CA_BUNDLE) is not base64"},
		{"an unknown family", "Ubuntu", "", nil, `spec.amiFamily "Ubuntu" is not one of`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			if tc.userData != "" {
				in = withUserData(in, tc.userData)
			}
			if tc.in != nil {
				in = tc.in(in)
			}
			_, err := UserData(tc.family, in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestUserDataLimit: user data over EC2's 16 KB fails with the field to
// shorten, in every family that merges spec.userData.
func TestUserDataLimit(t *testing.T) {
	big := "#!/bin/bash\n# " + strings.Repeat("x", MaxUserData) + "\n"
	for _, family := range []string{awsv1.AMIFamilyAL2023, awsv1.AMIFamilyAL2, awsv1.AMIFamilyCustom} {
		_, err := UserData(family, withUserData(baseInput(), big))
		if err == nil || !strings.Contains(err.Error(), "spec.userData") || !strings.Contains(err.Error(), "16 KB") {
			t.Errorf("%s: error %v, want one naming spec.userData and the 16 KB limit", family, err)
		}
		// Its size is known, for karpenter_ec2nodeclasses_userdata_bytes.
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Size <= MaxUserData {
			t.Errorf("%s: error %v, want a TooLargeError with the size", family, err)
		}
	}
	if _, err := UserData(awsv1.AMIFamilyAL2023, withUserData(baseInput(), shellScript)); err != nil {
		t.Errorf("a small script: %v", err)
	}
}
