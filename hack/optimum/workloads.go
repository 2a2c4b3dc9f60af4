package main

import (
	"fmt"
	"strconv"
	"strings"
)

// A workload is a set of manifests, rendered as YAML and read back through
// pkg/manifests, the path `joiner plan -f` takes.
type workload struct {
	name  string
	set   string // "mixed" or "multi-pool"
	about string
	yaml  func() string
}

type podShape struct {
	name     string
	replicas int
	cpu, mem string
	extra    string // YAML appended to the pod spec, indented 6 spaces
	labels   map[string]string
}

const nodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
`

// poolSpec is a NodePool: extra requirement, taint, limit and label lines
// are YAML at their indentation.
type poolSpec struct {
	name                      string
	weight                    int
	capacityTypes, categories string
	reqs, taints, limits      string
	label                     string // one template label, key: value
}

func pool(p poolSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: %s\nspec:\n", p.name)
	if p.weight > 0 {
		fmt.Fprintf(&b, "  weight: %d\n", p.weight)
	}
	b.WriteString("  template:\n")
	if p.label != "" {
		fmt.Fprintf(&b, "    metadata:\n      labels: {%s}\n", p.label)
	}
	b.WriteString("    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n")
	b.WriteString(p.taints)
	b.WriteString("      requirements:\n")
	b.WriteString("        - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n")
	fmt.Fprintf(&b, "        - {key: karpenter.sh/capacity-type, operator: In, values: [%s]}\n", p.capacityTypes)
	if p.categories != "" {
		fmt.Fprintf(&b, "        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [%s]}\n", p.categories)
	}
	b.WriteString("        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: [\"2\"]}\n")
	b.WriteString(p.reqs)
	b.WriteString(p.limits)
	return b.String()
}

func deployments(shapes []podShape) string {
	var b strings.Builder
	for _, s := range shapes {
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\nspec:\n  replicas: %d\n", s.name, s.replicas)
		fmt.Fprintf(&b, "  selector: {matchLabels: {app: %s}}\n  template:\n    metadata:\n      labels: {app: %s}\n    spec:\n", s.name, s.name)
		b.WriteString(s.extra)
		fmt.Fprintf(&b, "      containers:\n        - name: c\n          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7\n          resources: {requests: {cpu: %q, memory: %q}}\n", s.cpu, s.mem)
	}
	return b.String()
}

func daemonSets(extraToleration bool) string {
	var b strings.Builder
	for _, d := range []struct{ name, cpu, mem, tol string }{
		{"aws-node", "25m", "64Mi", "      tolerations: [{operator: Exists}]\n"},
		{"kube-proxy", "100m", "128Mi", "      tolerations: [{operator: Exists}]\n"},
		{"ebs-csi-node", "30m", "120Mi", ""},
	} {
		tol := d.tol
		if tol == "" && extraToleration {
			tol = "      tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule}]\n"
		}
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: %s\n  namespace: kube-system\nspec:\n  selector: {matchLabels: {app: %s}}\n  template:\n    metadata:\n      labels: {app: %s}\n    spec:\n      nodeSelector: {kubernetes.io/os: linux}\n%s", d.name, d.name, d.name, tol)
		fmt.Fprintf(&b, "      containers:\n        - name: c\n          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7\n          resources: {requests: {cpu: %q, memory: %q}}\n", d.cpu, d.mem)
	}
	return b.String()
}

const zoneSpread = "      topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: %s}}}]\n"

func spreadShape(s podShape) podShape {
	s.extra += fmt.Sprintf(zoneSpread, s.name)
	return s
}

const batchPodSpec = "      tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule}]\n      nodeSelector: {karpenter.sh/nodepool: batch}\n"
const memoryPodSpec = "      nodeSelector: {workload-type: memory}\n      tolerations: [{key: workload-type, value: memory, effect: NoSchedule}]\n"

func workloads() []workload {
	onDemand := pool(poolSpec{name: "default", capacityTypes: "on-demand", categories: "c, m, r"})
	return []workload{
		{"mixed-1000", "mixed", "4 shapes, one on-demand c/m/r pool", func() string {
			return nodeClass + onDemand + deployments([]podShape{
				{name: "web", replicas: 250, cpu: "500m", mem: "1Gi"},
				{name: "api", replicas: 250, cpu: "1500m", mem: "3Gi"},
				{name: "cache", replicas: 250, cpu: "1", mem: "6656Mi"},
				{name: "worker", replicas: 250, cpu: "3500m", mem: "2Gi"},
			})
		}},
		{"mixed-2000", "mixed", "6 uneven shapes, one on-demand c/m/r pool", func() string {
			return nodeClass + onDemand + deployments([]podShape{
				{name: "a", replicas: 600, cpu: "300m", mem: "700Mi"},
				{name: "b", replicas: 400, cpu: "1200m", mem: "2560Mi"},
				{name: "c", replicas: 300, cpu: "2700m", mem: "5Gi"},
				{name: "d", replicas: 300, cpu: "750m", mem: "7Gi"},
				{name: "e", replicas: 100, cpu: "6", mem: "10Gi"},
				{name: "f", replicas: 300, cpu: "100m", mem: "200Mi"},
			})
		}},
		{"mixed-5000", "mixed", "4 shapes, one on-demand c/m/r pool", func() string {
			return nodeClass + onDemand + deployments([]podShape{
				{name: "a", replicas: 1250, cpu: "2", mem: "3Gi"},
				{name: "b", replicas: 1250, cpu: "700m", mem: "5Gi"},
				{name: "c", replicas: 1250, cpu: "1300m", mem: "1331Mi"},
				{name: "d", replicas: 1250, cpu: "3", mem: "12Gi"},
			})
		}},
		{"mixed-5000-daemonsets", "mixed", "8 shapes and 3 DaemonSets, one on-demand c/m/r pool", func() string {
			return nodeClass + onDemand + daemonSets(false) + deployments([]podShape{
				{name: "a", replicas: 900, cpu: "250m", mem: "512Mi"},
				{name: "b", replicas: 700, cpu: "1", mem: "2Gi"},
				{name: "c", replicas: 600, cpu: "2", mem: "1Gi"},
				{name: "d", replicas: 600, cpu: "500m", mem: "4Gi"},
				{name: "e", replicas: 600, cpu: "1500m", mem: "6Gi"},
				{name: "f", replicas: 500, cpu: "3", mem: "2Gi"},
				{name: "g", replicas: 600, cpu: "100m", mem: "128Mi"},
				{name: "h", replicas: 500, cpu: "4", mem: "8Gi"},
			})
		}},
		{"many-small-5000", "mixed", "5,000 pods of 20-100 millicores: pod slots bind", func() string {
			return nodeClass + onDemand + deployments([]podShape{
				{name: "tiny", replicas: 2000, cpu: "20m", mem: "32Mi"},
				{name: "small", replicas: 2000, cpu: "50m", mem: "64Mi"},
				{name: "sidecar", replicas: 1000, cpu: "100m", mem: "128Mi"},
			})
		}},
		{"huge-few-1200", "mixed", "50 pods of 28-60 CPUs among 1,150 small and medium ones", func() string {
			return nodeClass + onDemand + deployments([]podShape{
				{name: "big", replicas: 30, cpu: "28", mem: "100Gi"},
				{name: "huge", replicas: 20, cpu: "60", mem: "200Gi"},
				{name: "medium", replicas: 150, cpu: "2", mem: "4Gi"},
				{name: "small", replicas: 1000, cpu: "250m", mem: "512Mi"},
			})
		}},
		{"spot-and-on-demand-3000", "mixed", "6 shapes, one pool allowing spot and on-demand c/m/r", func() string {
			return nodeClass + pool(poolSpec{name: "default", capacityTypes: "spot, on-demand", categories: "c, m, r"}) + deployments([]podShape{
				{name: "a", replicas: 700, cpu: "500m", mem: "1Gi"},
				{name: "b", replicas: 500, cpu: "1", mem: "4Gi"},
				{name: "c", replicas: 500, cpu: "2", mem: "2Gi"},
				{name: "d", replicas: 500, cpu: "750m", mem: "1536Mi"},
				{name: "e", replicas: 400, cpu: "3", mem: "6Gi"},
				{name: "f", replicas: 400, cpu: "200m", mem: "3Gi"},
			})
		}},
		{"pools-weighted-tainted-2000", "multi-pool", "4 pools (weights, a tainted spot pool, a labelled memory pool, a CPU limit) and 3 DaemonSets", func() string {
			return nodeClass +
				pool(poolSpec{name: "savings", weight: 50, capacityTypes: "on-demand", reqs: "        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i, m7i]}\n", limits: "  limits: {cpu: \"200\"}\n"}) +
				pool(poolSpec{name: "default", weight: 10, capacityTypes: "on-demand", categories: "c, m, r"}) +
				pool(poolSpec{name: "memory", weight: 20, capacityTypes: "on-demand", categories: "r", label: "workload-type: memory", taints: "      taints: [{key: workload-type, value: memory, effect: NoSchedule}]\n"}) +
				pool(poolSpec{name: "batch", capacityTypes: "spot", categories: "c, m", taints: "      taints: [{key: dedicated, value: batch, effect: NoSchedule}]\n"}) +
				daemonSets(true) + deployments([]podShape{
				{name: "web", replicas: 500, cpu: "500m", mem: "1Gi"},
				{name: "api", replicas: 400, cpu: "1500m", mem: "3Gi"},
				{name: "worker", replicas: 200, cpu: "3", mem: "2Gi"},
				{name: "cache", replicas: 200, cpu: "1", mem: "12Gi", extra: memoryPodSpec},
				{name: "analytics", replicas: 100, cpu: "2", mem: "24Gi", extra: memoryPodSpec},
				{name: "batch-a", replicas: 400, cpu: "2", mem: "4Gi", extra: batchPodSpec},
				{name: "batch-b", replicas: 200, cpu: "700m", mem: "6Gi", extra: batchPodSpec},
			})
		}},
		{"pools-zone-spread-1500", "multi-pool", "2 weighted pools, 3 of 5 shapes zone-spread, 3 DaemonSets", func() string {
			return nodeClass +
				pool(poolSpec{name: "compute", weight: 20, capacityTypes: "on-demand", categories: "c", limits: "  limits: {cpu: \"400\"}\n"}) +
				pool(poolSpec{name: "default", weight: 10, capacityTypes: "on-demand", categories: "c, m, r"}) +
				daemonSets(false) + deployments([]podShape{
				spreadShape(podShape{name: "frontend", replicas: 400, cpu: "1", mem: "1Gi"}),
				spreadShape(podShape{name: "checkout", replicas: 300, cpu: "1500m", mem: "4Gi"}),
				spreadShape(podShape{name: "search", replicas: 200, cpu: "2", mem: "8Gi"}),
				{name: "jobs", replicas: 400, cpu: "250m", mem: "512Mi"},
				{name: "reports", replicas: 200, cpu: "3", mem: "3Gi"},
			})
		}},
		{"pools-spot-fallback-2500", "multi-pool", "a spot pool (weight 20) over an on-demand one, both c/m/r, 6 shapes, 3 DaemonSets", func() string {
			return nodeClass +
				pool(poolSpec{name: "spot", weight: 20, capacityTypes: "spot", categories: "c, m, r", limits: "  limits: {cpu: \"1500\"}\n"}) +
				pool(poolSpec{name: "on-demand", weight: 10, capacityTypes: "on-demand", categories: "c, m, r"}) +
				daemonSets(false) + deployments([]podShape{
				{name: "a", replicas: 600, cpu: "500m", mem: "1Gi"},
				{name: "b", replicas: 500, cpu: "1", mem: "4Gi"},
				{name: "c", replicas: 500, cpu: "2", mem: "2Gi"},
				{name: "d", replicas: 400, cpu: "750m", mem: "1536Mi"},
				{name: "e", replicas: 300, cpu: "3", mem: "6Gi"},
				{name: "f", replicas: 200, cpu: "200m", mem: "3Gi"},
			})
		}},
		{"scale-10000", "scale", "10,000 pods of 50 shapes over 3 pools (a spot pool with a CPU limit over on-demand, a tainted memory pool), 10 shapes zone-spread, 3 DaemonSets", scaleWorkload},
	}
}

// scaleWorkload is the controller-scale batch: 50 shapes of 200 pods.
func scaleWorkload() string {
	cpus := []string{"100m", "250m", "500m", "750m", "1", "1500m", "2", "3", "4", "6"}
	gibPerCPU := []float64{1, 2, 4, 8, 3}
	var shapes []podShape
	for i := range 50 {
		cpu := cpus[i%len(cpus)]
		q := resourceMilli(cpu)
		mem := fmt.Sprintf("%dMi", int(float64(q)/1000*gibPerCPU[i/len(cpus)]*1024))
		s := podShape{name: fmt.Sprintf("svc-%02d", i), replicas: 200, cpu: cpu, mem: mem}
		switch {
		case i%5 == 0:
			s = spreadShape(s)
		case i/len(cpus) == 3 && i%2 == 1:
			s.extra = memoryPodSpec
		}
		shapes = append(shapes, s)
	}
	return nodeClass +
		pool(poolSpec{name: "spot", weight: 20, capacityTypes: "spot", categories: "c, m, r", limits: "  limits: {cpu: \"3000\"}\n"}) +
		pool(poolSpec{name: "default", weight: 10, capacityTypes: "on-demand", categories: "c, m, r"}) +
		pool(poolSpec{name: "memory", weight: 30, capacityTypes: "on-demand", categories: "r", label: "workload-type: memory", taints: "      taints: [{key: workload-type, value: memory, effect: NoSchedule}]\n"}) +
		daemonSets(false) + deployments(shapes)
}

func resourceMilli(q string) int {
	if v, ok := strings.CutSuffix(q, "m"); ok {
		n, _ := strconv.Atoi(v)
		return n
	}
	n, _ := strconv.Atoi(q)
	return n * 1000
}
