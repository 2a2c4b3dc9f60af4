package amifamily

import (
	"errors"
	"strconv"

	"github.com/pelletier/go-toml/v2"
)

// bottlerocketUserData is Bottlerocket's user data: one TOML document of
// settings. The user's document is the base and every key of it is kept;
// Joiner then sets the keys that make the node the one the scheduler
// planned: the cluster's identity, labels (merged over the user's), taints
// (Joiner's replace the user's: a taint the NodePool does not declare would
// repel pods the scheduler placed there), max pods and the class's kubelet
// settings.
func bottlerocketUserData(in Input) (string, error) {
	doc := map[string]any{}
	if in.CustomUserData != nil {
		if err := toml.Unmarshal([]byte(*in.CustomUserData), &doc); err != nil {
			// The position is the fix's address: the parser's message
			// alone ("expected character ]") does not say where.
			var derr *toml.DecodeError
			if errors.As(err, &derr) {
				row, col := derr.Position()
				return "", userDataError("not valid TOML for Bottlerocket at line %d, column %d: %v", row, col, err)
			}
			return "", userDataError("not valid TOML for Bottlerocket: %v", err)
		}
	}
	settings, err := table(doc, "settings", "")
	if err != nil {
		return "", err
	}
	k8s, err := table(settings, "kubernetes", "settings.")
	if err != nil {
		return "", err
	}
	k8s["cluster-name"] = in.ClusterName
	k8s["api-server"] = in.ClusterEndpoint
	if in.CABundle != "" {
		k8s["cluster-certificate"] = in.CABundle
	}
	if dns := in.clusterDNS(); len(dns) == 1 {
		k8s["cluster-dns-ip"] = dns[0]
	} else if len(dns) > 1 {
		k8s["cluster-dns-ip"] = dns
	}
	if n := in.maxPods(); n > 0 {
		k8s["max-pods"] = int64(n)
	}
	labels, err := table(k8s, "node-labels", "settings.kubernetes.")
	if err != nil {
		return "", err
	}
	for _, l := range in.labels() {
		labels[l[0]] = l[1]
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints := map[string]any{}
	for _, t := range in.taints() {
		values, _ := taints[t.Key].([]string)
		taints[t.Key] = append(values, t.Value+":"+string(t.Effect))
	}
	if len(taints) > 0 {
		k8s["node-taints"] = taints
	} else {
		delete(k8s, "node-taints")
	}
	if k := in.Kubelet; k != nil {
		setMap := func(key string, m map[string]string) {
			if len(m) > 0 {
				t := map[string]any{}
				for mk, v := range m {
					t[mk] = v
				}
				k8s[key] = t
			}
		}
		setMap("kube-reserved", k.KubeReserved)
		setMap("system-reserved", k.SystemReserved)
		setMap("eviction-hard", k.EvictionHard)
		setMap("eviction-soft", k.EvictionSoft)
		if len(k.EvictionSoftGracePeriod) > 0 {
			grace := map[string]string{}
			for key, d := range k.EvictionSoftGracePeriod {
				grace[key] = d.Duration.String()
			}
			setMap("eviction-soft-grace-period", grace)
		}
		if k.EvictionMaxPodGracePeriod != nil {
			k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
		}
		// Bottlerocket models these two as strings.
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*k.ImageGCHighThresholdPercent))
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*k.ImageGCLowThresholdPercent))
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	if in.InstanceStoreRAID0 {
		commands, err := table(settings, "bootstrap-commands", "settings.")
		if err != nil {
			return "", err
		}
		// Bootstrap commands run in the order of their names, before the
		// kubelet starts: "000-" puts the disks ahead of the user's own.
		// init stripes every instance store disk into one array; bind moves
		// the directories that hold images, pod volumes and logs onto it.
		commands[bottlerocketInstanceStoreCommand] = map[string]any{
			"commands": [][]string{
				{"apiclient", "ephemeral-storage", "init"},
				{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}
	}
	// Joiner's nodes join no Auto Scaling group: waiting for one would hold
	// the kubelet forever.
	if autoscaling, ok := settings["autoscaling"].(map[string]any); ok {
		if _, ok := autoscaling["should-wait"]; ok {
			autoscaling["should-wait"] = false
		}
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return "", userDataError("cannot be written back as TOML: %v", err)
	}
	return string(out), nil
}

// bottlerocketInstanceStoreCommand is the bootstrap command that sets up
// the instance store. Karpenter uses the same name, so a user's TOML that
// overrides it keeps working.
const bottlerocketInstanceStoreCommand = "000-mount-instance-storage"

// table returns doc[key] as a table, creating it when absent; a key that
// holds something else is the user's mistake, named with its path.
func table(doc map[string]any, key, path string) (map[string]any, error) {
	v, ok := doc[key]
	if !ok {
		t := map[string]any{}
		doc[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, userDataError("%s%s must be a TOML table, got %T", path, key, v)
	}
	return t, nil
}
