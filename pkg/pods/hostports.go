package pods

import corev1 "k8s.io/api/core/v1"

// HostPort is a port a pod binds on its node's network.
type HostPort struct {
	IP       string
	Port     int32
	Protocol corev1.Protocol
}

// HostPorts lists the host ports of every container, init containers
// included: kube-scheduler's NodePorts filter counts those too (a sidecar,
// or an init container that is still to run, holds its port).
func HostPorts(pod *corev1.Pod) []HostPort {
	var out []HostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, HostPort{IP: p.HostIP, Port: p.HostPort, Protocol: proto})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

// Conflicts reports whether two host ports cannot share a node: same port
// and protocol, on the same address or where either is a wildcard.
func (h HostPort) Conflicts(o HostPort) bool {
	if h.Port != o.Port || h.Protocol != o.Protocol {
		return false
	}
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return h.IP == o.IP || wild(h.IP) || wild(o.IP)
}
