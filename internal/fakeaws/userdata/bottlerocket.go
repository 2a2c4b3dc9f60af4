package userdata

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
)

type bottlerocketSettings struct {
	Settings struct {
		BootstrapCommands map[string]bottlerocketCommand `toml:"bootstrap-commands"`
		Kubernetes        struct {
			ClusterName        string            `toml:"cluster-name"`
			APIServer          string            `toml:"api-server"`
			ClusterCertificate string            `toml:"cluster-certificate"`
			ClusterDNSIP       any               `toml:"cluster-dns-ip"`
			MaxPods            *int32            `toml:"max-pods"`
			NodeLabels         map[string]string `toml:"node-labels"`
			NodeTaints         map[string]any    `toml:"node-taints"`
			KubeReserved       map[string]string `toml:"kube-reserved"`
			SystemReserved     map[string]string `toml:"system-reserved"`
			EvictionHard       map[string]string `toml:"eviction-hard"`
		} `toml:"kubernetes"`
	} `toml:"settings"`
}

// decodeBottlerocket reads Bottlerocket user data: TOML whose
// [settings.kubernetes] table configures the kubelet. Bottlerocket refuses
// user data that is not valid TOML and cannot join without the cluster's
// name, API server and certificate.
func decodeBottlerocket(raw []byte) (*Config, error) {
	var s bottlerocketSettings
	if err := toml.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("bottlerocket: user data is not valid TOML: %w", err)
	}
	k := s.Settings.Kubernetes
	switch {
	case k.ClusterName == "":
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-name is missing")
	case k.APIServer == "":
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.api-server is missing")
	case k.ClusterCertificate == "":
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-certificate is missing")
	}
	ca, err := base64.StdEncoding.DecodeString(k.ClusterCertificate)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-certificate: %w", err)
	}
	c := &Config{ClusterName: k.ClusterName, APIServerEndpoint: k.APIServer, CertificateAuthority: ca, MaxPods: k.MaxPods}
	switch v := k.ClusterDNSIP.(type) {
	case nil:
	case string:
		c.ClusterDNS = []string{v}
	case []any:
		for _, ip := range v {
			s, ok := ip.(string)
			if !ok {
				return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-dns-ip: %v is not a string", ip)
			}
			c.ClusterDNS = append(c.ClusterDNS, s)
		}
	default:
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.cluster-dns-ip: a string or a list of strings, not %T", v)
	}
	if len(k.NodeLabels) > 0 {
		if err := validateNodeLabels(k.NodeLabels); err != nil {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-labels: %w", err)
		}
		c.Labels = k.NodeLabels
	}
	if c.Taints, err = bottlerocketTaints(k.NodeTaints); err != nil {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.node-taints: %w", err)
	}
	if c.KubeReserved, err = resourceList(k.KubeReserved); err != nil {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.kube-reserved: %w", err)
	}
	if c.SystemReserved, err = resourceList(k.SystemReserved); err != nil {
		return nil, fmt.Errorf("bottlerocket: settings.kubernetes.system-reserved: %w", err)
	}
	if k.EvictionHard != nil {
		if err := validateEviction(k.EvictionHard); err != nil {
			return nil, fmt.Errorf("bottlerocket: settings.kubernetes.eviction-hard: %w", err)
		}
		c.EvictionHard = k.EvictionHard
	}
	if c.LocalStorage, err = bottlerocketLocalStorage(s.Settings.BootstrapCommands); err != nil {
		return nil, err
	}
	return c, nil
}

// bottlerocketCommand is one [settings.bootstrap-commands.<name>] entry.
type bottlerocketCommand struct {
	Commands  [][]string `toml:"commands"`
	Mode      string     `toml:"mode"`
	Essential bool       `toml:"essential"`
}

// bottlerocketLocalStorage reads the bootstrap commands as Bottlerocket
// runs them: "apiclient ephemeral-storage init" builds a RAID0 array of the
// instance store disks (its default), and "bind --dirs" moves directories
// onto it; the kubelet's storage is the array only when both run, init
// first, and /var/lib/kubelet is among the bound directories.
func bottlerocketLocalStorage(cmds map[string]bottlerocketCommand) (LocalStorage, error) {
	names := make([]string, 0, len(cmds))
	for name, cmd := range cmds {
		switch cmd.Mode {
		case "always", "once", "off":
		default:
			return "", fmt.Errorf("bottlerocket: settings.bootstrap-commands.%s.mode %q: must be always, once or off", name, cmd.Mode)
		}
		if cmd.Mode != "off" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	initialized := false
	for _, name := range names {
		for _, argv := range cmds[name].Commands {
			if len(argv) < 3 || argv[0] != "apiclient" || argv[1] != "ephemeral-storage" {
				continue
			}
			switch argv[2] {
			case "init":
				initialized = true
			case "bind":
				if !initialized {
					return "", fmt.Errorf("bottlerocket: settings.bootstrap-commands.%s: apiclient ephemeral-storage bind before init fails, and the node with it", name)
				}
				for _, dir := range argv[3:] {
					if dir == "/var/lib/kubelet" {
						return LocalStorageRAID0, nil
					}
				}
			}
		}
	}
	return "", nil
}

// bottlerocketTaints reads node-taints: each key maps to "value:Effect" or a
// list of them.
func bottlerocketTaints(m map[string]any) ([]corev1.Taint, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []corev1.Taint
	for _, key := range keys {
		var specs []string
		switch v := m[key].(type) {
		case string:
			specs = []string{v}
		case []any:
			for _, s := range v {
				str, ok := s.(string)
				if !ok {
					return nil, fmt.Errorf("%s: %v is not a string", key, s)
				}
				specs = append(specs, str)
			}
		default:
			return nil, fmt.Errorf("%s: want \"value:Effect\" or a list of them, not %T", key, v)
		}
		for _, spec := range specs {
			value, effect, ok := strings.Cut(spec, ":")
			if !ok {
				return nil, fmt.Errorf("%s: %q is not of the form value:Effect", key, spec)
			}
			t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
			if err := validateTaint(t); err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}
