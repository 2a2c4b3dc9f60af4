package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// NodeadmContentType is the MIME type of a NodeConfig part.
const NodeadmContentType = "application/node.eks.aws"

const nodeadmAPIVersion = "node.eks.aws/v1alpha1"

// DefaultEvictionHard is what the EKS images configure when the user data
// sets no hard eviction thresholds.
var DefaultEvictionHard = map[string]string{
	"memory.available":  "100Mi",
	"nodefs.available":  "10%",
	"nodefs.inodesFree": "5%",
}

type nodeConfig struct {
	Spec struct {
		Cluster struct {
			Name                 string `json:"name"`
			APIServerEndpoint    string `json:"apiServerEndpoint"`
			CertificateAuthority []byte `json:"certificateAuthority"`
			CIDR                 string `json:"cidr"`
		} `json:"cluster"`
		Instance struct {
			LocalStorage struct {
				Strategy LocalStorage `json:"strategy"`
			} `json:"localStorage"`
		} `json:"instance"`
		Kubelet struct {
			Config json.RawMessage `json:"config"`
			Flags  []string        `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

type kubeletConfig struct {
	MaxPods            *int32            `json:"maxPods"`
	ClusterDNS         []string          `json:"clusterDNS"`
	KubeReserved       map[string]string `json:"kubeReserved"`
	SystemReserved     map[string]string `json:"systemReserved"`
	EvictionHard       map[string]string `json:"evictionHard"`
	RegisterWithTaints []corev1.Taint    `json:"registerWithTaints"`
}

// decodeNodeadm reads user data as nodeadm does on AL2023: every
// application/node.eks.aws part of a MIME multipart document (or the whole
// user data when it is not MIME) is a NodeConfig; they are merged in order,
// later values winning, kubelet flags appended and kubelet config merged key
// by key. Shell-script parts are cloud-init's business and are skipped.
func decodeNodeadm(raw []byte) (*Config, error) {
	raw, err := unwrap(raw)
	if err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}
	var docs [][]byte
	bare := !isMIME(raw)
	if !bare {
		parts, err := mimeParts(raw)
		if err != nil {
			return nil, fmt.Errorf("nodeadm: %w", err)
		}
		for _, p := range parts {
			if p.contentType == NodeadmContentType {
				body, err := unwrap(p.body)
				if err != nil {
					return nil, fmt.Errorf("nodeadm: %w", err)
				}
				docs = append(docs, body)
			}
		}
	} else {
		docs = [][]byte{raw}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("nodeadm: could not find NodeConfig within UserData (no %s part)", NodeadmContentType)
	}
	merged := map[string]any{}
	for i, d := range docs {
		var doc map[string]any
		err := yaml.Unmarshal(d, &doc)
		if bare && (err != nil || doc["kind"] != "NodeConfig") {
			return nil, fmt.Errorf("nodeadm: user data is neither a MIME multipart document nor a NodeConfig (%v)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("nodeadm: NodeConfig %d: %w", i+1, err)
		}
		if doc["apiVersion"] != nodeadmAPIVersion || doc["kind"] != "NodeConfig" {
			return nil, fmt.Errorf("nodeadm: NodeConfig %d: apiVersion %v, kind %v: want %s, NodeConfig", i+1, doc["apiVersion"], doc["kind"], nodeadmAPIVersion)
		}
		mergeNodeConfig(merged, doc)
	}
	js, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	var nc nodeConfig
	if err := json.Unmarshal(js, &nc); err != nil {
		return nil, fmt.Errorf("nodeadm: NodeConfig: %w", err)
	}
	cl := nc.Spec.Cluster
	switch {
	case cl.Name == "":
		return nil, fmt.Errorf("nodeadm: Name is missing in cluster configuration")
	case cl.APIServerEndpoint == "":
		return nil, fmt.Errorf("nodeadm: Apiserver endpoint is missing in cluster configuration")
	case cl.CertificateAuthority == nil:
		return nil, fmt.Errorf("nodeadm: Certificate authority is missing in cluster configuration")
	case cl.CIDR == "":
		return nil, fmt.Errorf("nodeadm: CIDR is missing in cluster configuration")
	}
	c := &Config{
		ClusterName:          cl.Name,
		APIServerEndpoint:    cl.APIServerEndpoint,
		CertificateAuthority: cl.CertificateAuthority,
		ClusterCIDR:          cl.CIDR,
	}
	if len(nc.Spec.Kubelet.Config) > 0 {
		var kc kubeletConfig
		if err := json.Unmarshal(nc.Spec.Kubelet.Config, &kc); err != nil {
			return nil, fmt.Errorf("nodeadm: spec.kubelet.config: %w", err)
		}
		c.MaxPods, c.ClusterDNS = kc.MaxPods, kc.ClusterDNS
		if c.KubeReserved, err = resourceList(kc.KubeReserved); err != nil {
			return nil, fmt.Errorf("nodeadm: spec.kubelet.config.kubeReserved: %w", err)
		}
		if c.SystemReserved, err = resourceList(kc.SystemReserved); err != nil {
			return nil, fmt.Errorf("nodeadm: spec.kubelet.config.systemReserved: %w", err)
		}
		if kc.EvictionHard != nil {
			if err := validateEviction(kc.EvictionHard); err != nil {
				return nil, fmt.Errorf("nodeadm: spec.kubelet.config.evictionHard: %w", err)
			}
			// nodeadm merges the user's thresholds into its defaults.
			c.EvictionHard = maps.Clone(DefaultEvictionHard)
			maps.Copy(c.EvictionHard, kc.EvictionHard)
		}
		for _, t := range kc.RegisterWithTaints {
			if err := validateTaint(t); err != nil {
				return nil, fmt.Errorf("nodeadm: spec.kubelet.config.registerWithTaints: %w", err)
			}
		}
		c.Taints = kc.RegisterWithTaints
	}
	if err := c.kubeletFlags(nc.Spec.Kubelet.Flags); err != nil {
		return nil, fmt.Errorf("nodeadm: spec.kubelet.flags: %w", err)
	}
	switch s := nc.Spec.Instance.LocalStorage.Strategy; s {
	case "", LocalStorageRAID0, LocalStorageRAID10, LocalStorageMount:
		c.LocalStorage = s
	default:
		return nil, fmt.Errorf("nodeadm: spec.instance.localStorage.strategy %q: must be one of RAID0, RAID10, Mount", s)
	}
	return c, nil
}

// unwrap undoes what nodeadm undoes before parsing, on the whole user data
// and on each NodeConfig part: base64, then gzip.
func unwrap(b []byte) ([]byte, error) {
	if dec, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b))); err == nil && len(dec) > 0 {
		b = dec
	}
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("failed to decompress user data: %w", err)
		}
		defer zr.Close()
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("failed to decompress user data: %w", err)
		}
		return out, nil
	}
	return b, nil
}

// mergeNodeConfig merges src into dst as nodeadm does: maps key by key with
// src winning, spec.kubelet.flags appended, every other value replaced.
func mergeNodeConfig(dst, src map[string]any) {
	var merge func(dst, src map[string]any, path string)
	merge = func(dst, src map[string]any, path string) {
		for k, sv := range src {
			p := path + "." + k
			if p == ".spec.kubelet.flags" {
				dl, _ := dst[k].([]any)
				sl, _ := sv.([]any)
				dst[k] = append(dl, sl...)
				continue
			}
			sm, sok := sv.(map[string]any)
			dm, dok := dst[k].(map[string]any)
			if sok && dok {
				merge(dm, sm, p)
				continue
			}
			dst[k] = sv
		}
	}
	merge(dst, src, "")
}
