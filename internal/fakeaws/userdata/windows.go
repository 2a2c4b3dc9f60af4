package userdata

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// decodeWindows reads Windows user data: a <powershell> block that calls the
// image's Start-EKSBootstrap.ps1 (directly or through a variable holding its
// path) with named parameters.
func decodeWindows(raw []byte) (*Config, error) {
	s := string(raw)
	start := strings.Index(s, "<powershell>")
	end := strings.Index(s, "</powershell>")
	if start < 0 || end < start {
		return nil, fmt.Errorf("windows: user data has no <powershell>...</powershell> block, so EC2Launch runs nothing")
	}
	cmds, err := shellCommands(s[start+len("<powershell>"):end], true)
	if err != nil {
		return nil, fmt.Errorf("windows: %w", err)
	}
	scriptVars := map[string]bool{}
	for _, words := range cmds {
		// [string]$EKSBootstrapScriptFile = "...Start-EKSBootstrap.ps1"
		if len(words) >= 3 && words[1] == "=" && strings.HasSuffix(words[2], "Start-EKSBootstrap.ps1") {
			name := words[0][strings.LastIndex(words[0], "]")+1:]
			scriptVars[strings.ToLower(name)] = true
			continue
		}
		for i, w := range words {
			if strings.HasSuffix(w, "Start-EKSBootstrap.ps1") || scriptVars[strings.ToLower(w)] {
				return windowsArgs(words[i+1:])
			}
		}
	}
	return nil, fmt.Errorf("windows: user data never calls Start-EKSBootstrap.ps1, so the kubelet is never started")
}

func windowsArgs(args []string) (*Config, error) {
	params := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			// Redirections (3>&1) and the like.
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("windows: Start-EKSBootstrap.ps1: %s needs a value", a)
		}
		params[strings.ToLower(a)] = args[i+1]
		i++
	}
	c := &Config{ClusterName: params["-eksclustername"], APIServerEndpoint: params["-apiserverendpoint"]}
	if c.ClusterName == "" {
		return nil, fmt.Errorf("windows: Start-EKSBootstrap.ps1: -EKSClusterName is missing")
	}
	if b64 := params["-base64clusterca"]; b64 != "" {
		ca, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("windows: -Base64ClusterCA: %w", err)
		}
		c.CertificateAuthority = ca
	}
	c.DescribesCluster = c.APIServerEndpoint == "" || c.CertificateAuthority == nil
	if dns := params["-dnsclusterip"]; dns != "" {
		c.ClusterDNS = []string{dns}
	}
	if extra := params["-kubeletextraargs"]; extra != "" {
		words, err := shellCommands(extra, false)
		if err != nil {
			return nil, fmt.Errorf("windows: -KubeletExtraArgs: %w", err)
		}
		var flat []string
		for _, w := range words {
			flat = append(flat, w...)
		}
		if err := c.kubeletFlags(flat); err != nil {
			return nil, fmt.Errorf("windows: -KubeletExtraArgs: %w", err)
		}
	}
	return c, nil
}
