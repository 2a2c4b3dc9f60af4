package amifamily

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// nodeadm's NodeConfig (node.eks.aws/v1alpha1), the fields Joiner writes.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster  nodeConfigCluster   `json:"cluster"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
	Kubelet  nodeConfigKubelet   `json:"kubelet"`
}

// nodeConfigInstance is nodeadm's spec.instance; Joiner sets only the local
// storage strategy, which makes nodeadm build an md RAID0 array of the NVMe
// instance store disks and mount the kubelet's, containerd's and the pod
// logs' directories on it before the kubelet starts.
type nodeConfigInstance struct {
	LocalStorage nodeConfigLocalStorage `json:"localStorage"`
}

type nodeConfigLocalStorage struct {
	Strategy string `json:"strategy"`
}

type nodeConfigCluster struct {
	Name              string `json:"name"`
	APIServerEndpoint string `json:"apiServerEndpoint"`
	// CertificateAuthority is base64 PEM, as CLUSTER_CA_BUNDLE holds it.
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	CIDR                 string `json:"cidr,omitempty"`
}

type nodeConfigKubelet struct {
	// Config is merged by nodeadm into the kubelet's KubeletConfiguration,
	// whose field names the class's kubelet block already uses.
	Config map[string]any `json:"config,omitempty"`
	Flags  []string       `json:"flags,omitempty"`
}

const (
	nodeConfigAPIVersion = "node.eks.aws/v1alpha1"
	nodeConfigKind       = "NodeConfig"
)

// nodeadmUserData is AL2023's user data: a MIME archive whose last part is
// Joiner's NodeConfig. The user's parts come first: nodeadm merges the
// NodeConfig documents in order, later ones overriding earlier ones, so the
// user's additions apply while the cluster details, labels and taints the
// scheduler planned with stay Joiner's.
func nodeadmUserData(in Input) (string, error) {
	custom, err := nodeadmCustomParts(in.CustomUserData)
	if err != nil {
		return "", err
	}
	ours, err := nodeConfigYAML(in)
	if err != nil {
		return "", err
	}
	return writeMIME(append(custom, mimePart{contentType: ContentTypeNodeConfig, content: ours}))
}

func nodeConfigYAML(in Input) (string, error) {
	kubelet := map[string]any{}
	if in.Kubelet != nil {
		raw, err := json.Marshal(in.Kubelet)
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(raw, &kubelet); err != nil {
			return "", err
		}
	}
	if dns := in.clusterDNS(); len(dns) > 0 {
		kubelet["clusterDNS"] = dns
	}
	if n := in.maxPods(); n > 0 {
		kubelet["maxPods"] = n
	}
	if taints := in.taints(); len(taints) > 0 {
		kubelet["registerWithTaints"] = taints
	}
	config := nodeConfig{
		APIVersion: nodeConfigAPIVersion,
		Kind:       nodeConfigKind,
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{
				Name:                 in.ClusterName,
				APIServerEndpoint:    in.ClusterEndpoint,
				CertificateAuthority: in.CABundle,
				CIDR:                 in.ClusterCIDR,
			},
			Kubelet: nodeConfigKubelet{Config: kubelet},
		},
	}
	if in.InstanceStoreRAID0 {
		config.Spec.Instance = &nodeConfigInstance{LocalStorage: nodeConfigLocalStorage{Strategy: "RAID0"}}
	}
	if f := in.nodeLabelsFlag(); f != "" {
		config.Spec.Kubelet.Flags = []string{f}
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		return "", err
	}
	return "# Joiner's NodeConfig: cluster, labels, taints and kubelet settings\n" + string(out), nil
}

// nodeadmCustomParts reads spec.userData for AL2023: a MIME archive keeps
// its parts, a script starting with "#!" becomes a shell-script part, and
// anything else must be a NodeConfig document.
func nodeadmCustomParts(userData *string) ([]mimePart, error) {
	if userData == nil || strings.TrimSpace(*userData) == "" {
		return nil, nil
	}
	s := *userData
	switch {
	case isMIME(s):
		parts, err := parseMIME(s)
		if err != nil {
			return nil, userDataError("not a valid MIME multi-part archive: %v", err)
		}
		for i, p := range parts {
			if strings.HasPrefix(p.contentType, ContentTypeNodeConfig) {
				if err := checkNodeConfig(p.content); err != nil {
					return nil, userDataError("MIME part %d (%s): %v", i+1, ContentTypeNodeConfig, err)
				}
			}
		}
		return parts, nil
	case strings.HasPrefix(strings.TrimSpace(s), "#!"):
		return []mimePart{{contentType: ContentTypeShellScript, content: s}}, nil
	default:
		if err := checkNodeConfig(s); err != nil {
			return nil, userDataError("for AL2023 it must be a MIME multi-part archive, a shell script starting with #!, or a nodeadm NodeConfig: %v", err)
		}
		return []mimePart{{contentType: ContentTypeNodeConfig, content: s}}, nil
	}
}

// checkNodeConfig rejects what nodeadm would reject at boot, where the
// failure would only show as a node that never joins.
func checkNodeConfig(s string) error {
	var doc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return fmt.Errorf("NodeConfig is not valid YAML: %v", err)
	}
	if doc.Kind != nodeConfigKind || !strings.HasPrefix(doc.APIVersion, "node.eks.aws/") {
		return fmt.Errorf("expected apiVersion %s and kind %s, got apiVersion %q and kind %q", nodeConfigAPIVersion, nodeConfigKind, doc.APIVersion, doc.Kind)
	}
	return nil
}
