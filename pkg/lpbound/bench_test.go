package lpbound

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkBound runs the synthetic cloud catalogue (1,392 kinds: five
// memory:cpu families, twelve price variants each, sizes 2-192 vCPUs, in
// an on-demand and a spot pool) against 4, 50 and 300 pod shapes, and 50
// shapes with a GPU resource added. lpkinds is how many kinds survive
// dominance pruning; active is how many entered the simplex.
func BenchmarkBound(b *testing.B) {
	for _, bc := range []struct {
		shapes int
		gpus   bool
	}{{4, false}, {50, false}, {300, false}, {50, true}} {
		rng := rand.New(rand.NewPCG(42, uint64(bc.shapes)))
		kinds, pools := synthCatalog(rng, 12)
		shapes := synthShapes(rng, kinds, pools, bc.shapes)
		name := fmt.Sprintf("kinds=%d/shapes=%d", len(kinds), bc.shapes)
		if bc.gpus {
			kinds, shapes = withGPUs(rng, kinds, shapes)
			name = fmt.Sprintf("kinds=%d/shapes=%d/gpus", len(kinds), bc.shapes)
		}
		b.Run(name, func(b *testing.B) {
			var res Result
			var st stats
			for b.Loop() {
				var err error
				res, st, err = bound(kinds, shapes, true)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.LPKinds), "lpkinds")
			b.ReportMetric(float64(st.active), "active")
		})
	}
}
