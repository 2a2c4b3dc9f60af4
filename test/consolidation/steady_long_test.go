//go:build long

package consolidation

import "time"

// steadyWatch under the long build tag is the acceptance's full half hour
// (make soak).
const steadyWatch = 30 * time.Minute
