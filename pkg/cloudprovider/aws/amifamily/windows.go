package amifamily

import (
	"fmt"
	"strings"
)

// windowsUserData is a PowerShell block that runs the user's PowerShell and
// then the AMI's Start-EKSBootstrap.ps1 with the same kubelet flags AL2
// passes. EC2Launch runs only the first <powershell> block, so the user's
// script is placed inside ours rather than beside it.
func windowsUserData(in Input) string {
	q := func(s string) string { return shellQuote(s, true) }
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if in.CustomUserData != nil && strings.TrimSpace(*in.CustomUserData) != "" {
		b.WriteString(strings.TrimRight(stripPowershellTags(*in.CustomUserData), "\n") + "\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	fmt.Fprintf(&b, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s", q(in.ClusterName), q(in.ClusterEndpoint))
	if in.CABundle != "" {
		fmt.Fprintf(&b, " -Base64ClusterCA %s", q(in.CABundle))
	}
	if flags := in.kubeletFlags(); len(flags) > 0 {
		fmt.Fprintf(&b, " -KubeletExtraArgs %s", q(strings.Join(flags, " ")))
	}
	if dns := in.clusterDNS(); len(dns) > 0 {
		fmt.Fprintf(&b, " -DNSClusterIP %s", q(dns[0]))
	}
	b.WriteString("\n</powershell>\n")
	return b.String()
}

// stripPowershellTags lets a user write their script with or without its
// own <powershell> tags; nested tags would end our block early.
func stripPowershellTags(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<powershell>")
	s = strings.TrimSuffix(s, "</powershell>")
	return strings.Trim(s, "\r\n")
}
