package userdata

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// bootstrapScript is where the AL2 image keeps its bootstrap.
const bootstrapScript = "/etc/eks/bootstrap.sh"

// bootstrapOptions are the options /etc/eks/bootstrap.sh takes, each with
// one argument; any other word is positional, and the first positional word
// is the cluster name.
var bootstrapOptions = map[string]bool{
	"--use-max-pods": true, "--b64-cluster-ca": true, "--apiserver-endpoint": true,
	"--kubelet-extra-args": true, "--enable-docker-bridge": true, "--aws-api-retry-attempts": true,
	"--docker-config-json": true, "--containerd-config-file": true, "--pause-container-account": true,
	"--pause-container-version": true, "--dns-cluster-ip": true, "--container-runtime": true,
	"--ip-family": true, "--service-ipv6-cidr": true, "--enable-local-outpost": true,
	"--cluster-id": true, "--mount-bpf-fs": true, "--local-disks": true,
}

// decodeEKSBootstrap reads AL2 user data: a shell script, alone or as a
// text/x-shellscript part of a MIME document, that cloud-init runs and that
// calls /etc/eks/bootstrap.sh. The first call is the one that starts the
// kubelet.
func decodeEKSBootstrap(raw []byte) (*Config, error) {
	scripts := []string{string(raw)}
	if isMIME(raw) {
		parts, err := mimeParts(raw)
		if err != nil {
			return nil, fmt.Errorf("cloud-init: %w", err)
		}
		scripts = nil
		for _, p := range parts {
			if p.contentType == "text/x-shellscript" {
				scripts = append(scripts, string(p.body))
			}
		}
	}
	for _, s := range scripts {
		cmds, err := shellCommands(s, false)
		if err != nil {
			return nil, fmt.Errorf("user data script: %w", err)
		}
		for _, words := range cmds {
			for i, w := range words {
				if strings.HasSuffix(w, bootstrapScript) {
					return bootstrapArgs(words[i+1:])
				}
			}
		}
	}
	return nil, fmt.Errorf("user data never calls %s, so the kubelet is never started", bootstrapScript)
}

func bootstrapArgs(args []string) (*Config, error) {
	c := &Config{}
	opts := map[string]string{}
	var positional []string
	for i := 0; i < len(args); i++ {
		if bootstrapOptions[args[i]] {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("bootstrap.sh: %s needs a value", args[i])
			}
			opts[args[i]] = args[i+1]
			i++
			continue
		}
		if args[i] == "-h" || args[i] == "--help" {
			return nil, fmt.Errorf("bootstrap.sh: called with %s, which prints the usage and exits 1", args[i])
		}
		positional = append(positional, args[i])
	}
	if len(positional) == 0 || positional[0] == "" {
		return nil, fmt.Errorf("bootstrap.sh: ERROR: cluster name is not defined!")
	}
	c.ClusterName = positional[0]
	c.APIServerEndpoint = opts["--apiserver-endpoint"]
	if b64 := opts["--b64-cluster-ca"]; b64 != "" {
		ca, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("bootstrap.sh: --b64-cluster-ca: %w", err)
		}
		c.CertificateAuthority = ca
	}
	c.DescribesCluster = c.APIServerEndpoint == "" || c.CertificateAuthority == nil
	if dns := opts["--dns-cluster-ip"]; dns != "" {
		c.ClusterDNS = strings.Split(dns, ",")
	}
	if v, ok := opts["--use-max-pods"]; ok && v != "true" && v != "false" {
		return nil, fmt.Errorf("bootstrap.sh: --use-max-pods %q: true or false", v)
	}
	useMaxPods := opts["--use-max-pods"] != "false"
	if extra := opts["--kubelet-extra-args"]; extra != "" {
		words, err := shellCommands(extra, false)
		if err != nil {
			return nil, fmt.Errorf("bootstrap.sh: --kubelet-extra-args: %w", err)
		}
		var flat []string
		for _, w := range words {
			flat = append(flat, w...)
		}
		if err := c.kubeletFlags(flat); err != nil {
			return nil, fmt.Errorf("bootstrap.sh: --kubelet-extra-args: %w", err)
		}
	}
	if disks, ok := opts["--local-disks"]; ok {
		strategy, known := map[string]LocalStorage{"raid0": LocalStorageRAID0, "raid10": LocalStorageRAID10, "mount": LocalStorageMount}[disks]
		if !known {
			return nil, fmt.Errorf("bootstrap.sh: --local-disks %q: setup-local-disks takes raid0, raid10 or mount", disks)
		}
		c.LocalStorage = strategy
	}
	if c.MaxPods == nil && !useMaxPods {
		// Without --use-max-pods the kubelet keeps its own default.
		n := int32(110)
		c.MaxPods = &n
	}
	return c, nil
}
