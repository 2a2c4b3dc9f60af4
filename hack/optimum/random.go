package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// randomPools are the pools a random mix draws from: different capacity
// types and categories, so that pools price the same pods differently.
var randomPools = []poolSpec{
	{name: "general", capacityTypes: "on-demand", categories: "c, m, r"},
	{name: "spot", capacityTypes: "spot, on-demand", categories: "c, m, r"},
	{name: "compute", capacityTypes: "on-demand", categories: "c"},
	{name: "memory", capacityTypes: "on-demand", categories: "r"},
}

// randomWorkload is a mix the planner was not tuned on, drawn from seed:
// 4 to 30 Deployments, 1 to 3 pools with distinct weights, 1,000 to 5,000
// pods, each Deployment's pods of 100m to 4 CPUs with 1 to 16 GiB per CPU
// (log-uniform). With more than one pool, half the Deployments select one
// by karpenter.sh/nodepool; the others go where the weights send them.
func randomWorkload(seed uint64) workload {
	rng := rand.New(rand.NewPCG(seed, 38))
	nPools := 1 + rng.IntN(3)
	perm := rng.Perm(len(randomPools))
	var pools []poolSpec
	for i := range nPools {
		p := randomPools[perm[i]]
		if nPools > 1 {
			p.weight = 10 * (nPools - i)
		}
		pools = append(pools, p)
	}
	nDeploy := 4 + rng.IntN(27)
	total := 1000 + rng.IntN(4001)
	weights := make([]float64, nDeploy)
	sum := 0.0
	for i := range weights {
		weights[i] = 0.2 + rng.Float64()
		sum += weights[i]
	}
	var shapes []podShape
	placed := 0
	for i := range nDeploy {
		replicas := max(1, int(math.Round(float64(total)*weights[i]/sum)))
		if i == nDeploy-1 {
			replicas = max(1, total-placed)
		}
		placed += replicas
		milli := 100 + 50*rng.IntN(79) // 100m to 4 CPUs
		gibPerCPU := math.Exp(rng.Float64() * math.Log(16))
		mem := max(128, int(float64(milli)/1000*gibPerCPU*1024))
		s := podShape{name: fmt.Sprintf("d%02d", i), replicas: replicas, cpu: fmt.Sprintf("%dm", milli), mem: fmt.Sprintf("%dMi", mem)}
		if nPools > 1 && rng.IntN(2) == 0 {
			s.extra = fmt.Sprintf("      nodeSelector: {karpenter.sh/nodepool: %s}\n", pools[rng.IntN(nPools)].name)
		}
		shapes = append(shapes, s)
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.name
	}
	about := fmt.Sprintf("%d Deployments, pools %v", nDeploy, names)
	return workload{name: fmt.Sprintf("random-%d", seed), set: "random", about: about, yaml: func() string {
		out := nodeClass
		for _, p := range pools {
			out += pool(p)
		}
		return out + deployments(shapes)
	}}
}

// quantile is the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
