package overlay

import (
	"github.com/joiner-autoscaler/joiner/api/v1alpha1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
)

// Reasons of an overlay's ValidationSucceeded condition, as Karpenter
// v1.14.1 writes them.
const (
	ReasonValidationSucceeded = "ValidationSucceeded"
	ReasonRuntimeValidation   = "RuntimeValidation"
	ReasonConflict            = "Conflict"
	// ConflictMessage is the message of a conflicting overlay.
	ConflictMessage = "conflict with another overlay"
)

// Verdict is how an overlay fared: applied, or why not.
type Verdict struct {
	Applied bool
	Reason  string
	Message string
}

// Evaluate compiles the overlays and finds their conflicts over the pools'
// types. It returns the overlays to apply, in precedence order, and a
// verdict for each by name.
func Evaluate(nos []*v1alpha1.NodeOverlay, pools []Pool, typesByPool map[string][]*cloudprovider.InstanceType) ([]*Overlay, map[string]Verdict) {
	verdicts := make(map[string]Verdict, len(nos))
	var compiled []*Overlay
	for _, no := range nos {
		o, err := Compile(no)
		if err != nil {
			verdicts[no.Name] = Verdict{Reason: ReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		compiled = append(compiled, o)
	}
	Sort(compiled)
	conflicts := Conflicts(compiled, pools, typesByPool)
	applied := compiled[:0:0]
	for _, o := range compiled {
		if conflicts[o.Name] {
			verdicts[o.Name] = Verdict{Reason: ReasonConflict, Message: ConflictMessage}
			continue
		}
		verdicts[o.Name] = Verdict{Applied: true, Reason: ReasonValidationSucceeded}
		applied = append(applied, o)
	}
	return applied, verdicts
}
