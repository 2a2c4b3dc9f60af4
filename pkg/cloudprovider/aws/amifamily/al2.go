package amifamily

import (
	"fmt"
	"strings"
)

// bootstrapUserData is AL2's user data: a MIME archive whose last part runs
// the AMI's /etc/eks/bootstrap.sh. The user's script (or the parts of the
// user's MIME archive) come first, so that they can prepare the node
// (mounts, sysctls, proxies) before the kubelet starts.
func bootstrapUserData(in Input) (string, error) {
	custom, err := customShellParts(in.CustomUserData)
	if err != nil {
		return "", err
	}
	return writeMIME(append(custom, mimePart{contentType: ContentTypeShellScript, content: bootstrapScript(in)}))
}

func bootstrapScript(in Input) string {
	q := func(s string) string { return shellQuote(s, false) }
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh takes "--flag value", never "--flag=value".
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s", q(in.ClusterName), q(in.ClusterEndpoint))
	if in.CABundle != "" {
		fmt.Fprintf(&b, " --b64-cluster-ca %s", q(in.CABundle))
	}
	if in.ipv6() {
		b.WriteString(" \\\n--ip-family ipv6")
	}
	if in.InstanceStoreRAID0 {
		// bootstrap.sh's setup-local-disks builds the array and bind-mounts
		// the kubelet's and containerd's directories onto it.
		b.WriteString(" \\\n--local-disks raid0")
	}
	if dns := in.clusterDNS(); len(dns) > 0 {
		fmt.Fprintf(&b, " \\\n--dns-cluster-ip %s", q(dns[0]))
	}
	if in.maxPods() > 0 {
		// Else bootstrap.sh computes max pods from its own ENI table and
		// overrides --max-pods.
		b.WriteString(" \\\n--use-max-pods false")
	}
	if flags := in.kubeletFlags(); len(flags) > 0 {
		fmt.Fprintf(&b, " \\\n--kubelet-extra-args %s", q(strings.Join(flags, " ")))
	}
	b.WriteString("\n")
	return b.String()
}

// customShellParts are the user's parts for a cloud-init family: the parts of
// a MIME archive as written, or a plain script as one shell-script part.
func customShellParts(userData *string) ([]mimePart, error) {
	if userData == nil || strings.TrimSpace(*userData) == "" {
		return nil, nil
	}
	if isMIME(*userData) {
		parts, err := parseMIME(*userData)
		if err != nil {
			return nil, userDataError("not a valid MIME multi-part archive: %v", err)
		}
		return parts, nil
	}
	return []mimePart{{contentType: ContentTypeShellScript, content: *userData}}, nil
}
