//go:build !long

package consolidation

import "time"

// steadyWatch is how long TestSteadyState watches a converged cluster in the
// default suite; see its doc comment for what that covers.
const steadyWatch = 3 * time.Minute
