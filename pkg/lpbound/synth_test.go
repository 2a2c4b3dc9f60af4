package lpbound

import (
	"fmt"
	"math"
	"math/rand/v2"
)

const (
	gib = 1 << 30
	mib = 1 << 20
)

// synthCatalog builds a cloud-like catalogue: families with different
// memory:cpu ratios, several variants per family priced a little
// differently, sizes from 2 to 192 vCPUs, and kubelet overheads that make
// small nodes relatively worse, offered in two pools (on-demand, and spot
// at a discount with more price noise). Resources are cpu millicores,
// memory bytes, pod slots and ephemeral-storage bytes.
//
// It returns the kinds and, for each pool, the indices of its kinds.
func synthCatalog(rng *rand.Rand, variantsPerFamily int) ([]Kind, [2][]int) {
	families := []struct {
		name      string
		gibPerCPU float64
	}{{"c", 2}, {"m", 4}, {"r", 8}, {"x", 16}, {"z", 32}}
	sizes := []float64{2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192}
	var kinds []Kind
	var pools [2][]int
	for _, f := range families {
		for v := range variantsPerFamily {
			variant := 0.85 + 0.3*rng.Float64()
			for _, vcpu := range sizes {
				if f.gibPerCPU >= 16 && vcpu < 4 {
					continue
				}
				mem := vcpu * f.gibPerCPU
				base := (0.031*vcpu + 0.0042*mem) * variant
				maxPods := 110.0
				switch {
				case vcpu <= 2:
					maxPods = 29
				case vcpu <= 8:
					maxPods = 58
				}
				allocCPU := vcpu*1000 - (60 + 10 + 10 + 2.5*(vcpu-4))
				allocMem := mem*gib - (255+11*maxPods+100)*mib
				storage := 100.0 * gib
				if v%3 == 2 {
					storage = 75 * vcpu * gib // local NVMe variant
				}
				name := fmt.Sprintf("%s%d.%gx", f.name, v, vcpu)
				for pool, pricef := range []float64{
					1 + 0.03*rng.NormFloat64(),
					0.35 * (1 + 0.15*rng.NormFloat64()),
				} {
					pools[pool] = append(pools[pool], len(kinds))
					kinds = append(kinds, Kind{
						Name:     fmt.Sprintf("pool%d/%s", pool, name),
						Price:    base * math.Max(pricef, 0.05),
						Capacity: []float64{allocCPU, allocMem, maxPods, storage},
					})
				}
			}
		}
	}
	return kinds, pools
}

// synthShapes draws pod shapes with log-uniform cpu and memory:cpu ratio,
// half of them tolerating spot. Kinds lists only kinds that fit, as real
// callers do.
func synthShapes(rng *rand.Rand, kinds []Kind, pools [2][]int, n int) []Shape {
	shapes := make([]Shape, n)
	for i := range shapes {
		cpu := 50 * math.Pow(2, rng.Float64()*9) // 50m .. 25 cores
		ratio := math.Pow(2, -1+rng.Float64()*6) // 0.5 .. 32 GiB per core
		mem := cpu / 1000 * ratio * gib
		storage := 0.0
		if rng.IntN(3) == 0 {
			storage = float64(1+rng.IntN(20)) * gib
		}
		s := Shape{
			Name:    fmt.Sprintf("shape%d", i),
			Count:   float64(1 + rng.IntN(200)),
			Request: []float64{cpu, mem, 1, storage},
		}
		allowed := pools[0]
		if rng.IntN(2) == 0 {
			allowed = append(append([]int(nil), pools[0]...), pools[1]...)
		}
		for _, k := range allowed {
			if fits(s.Request, kinds[k].Capacity) {
				s.Kinds = append(s.Kinds, k)
			}
		}
		shapes[i] = s
	}
	return shapes
}

// withGPUs adds a fifth resource, GPUs, which most kinds have none of:
// every existing kind gets capacity 0, a GPU family is appended, and every
// fourth shape that fits the largest GPU kind asks for one GPU. This exercises resources that are zero on
// most kinds and requested by few shapes. GPU shapes may only use GPU
// kinds; the others keep their kinds, as a taint on GPU nodes would do.
func withGPUs(rng *rand.Rand, kinds []Kind, shapes []Shape) ([]Kind, []Shape) {
	out := make([]Kind, 0, len(kinds)+12)
	for _, k := range kinds {
		k.Capacity = append(append([]float64(nil), k.Capacity...), 0)
		out = append(out, k)
	}
	for v := range 4 {
		for _, gpus := range []float64{1, 4, 8} {
			vcpu := 8 * gpus
			out = append(out, Kind{
				Name:     fmt.Sprintf("g%d.%gx", v, gpus),
				Price:    gpus * (0.9 + 0.4*rng.Float64()),
				Capacity: []float64{vcpu*1000 - 200, vcpu * 8 * gib, 110, 500 * gib, gpus},
			})
		}
	}
	res := make([]Shape, len(shapes))
	for i, s := range shapes {
		s.Request = append(append([]float64(nil), s.Request...), 0)
		allowed := s.Kinds
		if i%4 == 3 && fits(s.Request, out[len(out)-1].Capacity) {
			s.Request[4] = 1
			allowed = nil
			for k := len(kinds); k < len(out); k++ {
				if fits(s.Request, out[k].Capacity) {
					allowed = append(allowed, k)
				}
			}
		}
		s.Kinds = allowed
		res[i] = s
	}
	return out, res
}
