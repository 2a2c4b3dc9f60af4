package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Well-known labels, annotations, finalizers and taints. Their values are part
// of the API: users' selectors, DaemonSets and dashboards key on them.
// ResourceNodes is the pseudo-resource of NodePool limits that counts
// nodes: the one limit a static NodePool may set.
const ResourceNodes corev1.ResourceName = "nodes"

const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"

	LabelNodePool        = Group + "/nodepool"
	LabelCapacityType    = Group + "/capacity-type"
	LabelNodeInitialized = Group + "/initialized"
	LabelNodeRegistered  = Group + "/registered"
	LabelDoNotSyncTaints = Group + "/do-not-sync-taints"

	AnnotationDoNotDisrupt                  = Group + "/do-not-disrupt"
	AnnotationNodePoolHash                  = Group + "/nodepool-hash"
	AnnotationNodePoolHashVersion           = Group + "/nodepool-hash-version"
	AnnotationNodeClaimTerminationTimestamp = Group + "/nodeclaim-termination-timestamp"
	AnnotationNodeClaimMinValuesRelaxed     = Group + "/nodeclaim-min-values-relaxed"
	// AnnotationPriceOverlayApplied and AnnotationCapacityOverlayApplied
	// mark a NodeClaim planned with a NodeOverlay's price or capacity on
	// some of its instance types.
	AnnotationPriceOverlayApplied    = Group + "/price-overlay-applied"
	AnnotationCapacityOverlayApplied = Group + "/capacity-overlay-applied"

	TerminationFinalizer = Group + "/termination"

	// AnnotationLaunchAttempted is Joiner's own: when the NodeClaim's
	// launch was first attempted (RFC 3339), written before the cloud is
	// asked. A NodeClaim that has it but no provider ID may have a machine
	// whose launch was never recorded; the cloud provider looks for it
	// before launching again.
	AnnotationLaunchAttempted = "joiner.sh/launch-attempted"
	// AnnotationReplacing is Joiner's own: the NodeClaims (comma-separated)
	// a disruption command launched this one to replace, while the command
	// runs. A controller that restarts mid-command releases those
	// NodeClaims and deletes the replacements nothing runs on yet.
	AnnotationReplacing = "joiner.sh/replacing"
)

// Taints Joiner manages on nodes.
var (
	DisruptedNoScheduleTaint   = corev1.Taint{Key: Group + "/disrupted", Effect: corev1.TaintEffectNoSchedule}
	UnregisteredNoExecuteTaint = corev1.Taint{Key: Group + "/unregistered", Effect: corev1.TaintEffectNoExecute}
)

// Condition types of NodeClaims and NodePools.
const (
	ConditionTypeReady                   = "Ready"
	ConditionTypeLaunched                = "Launched"
	ConditionTypeRegistered              = "Registered"
	ConditionTypeInitialized             = "Initialized"
	ConditionTypeConsolidatable          = "Consolidatable"
	ConditionTypeDrifted                 = "Drifted"
	ConditionTypeDisruptionReason        = "DisruptionReason"
	ConditionTypeDrained                 = "Drained"
	ConditionTypeVolumesDetached         = "VolumesDetached"
	ConditionTypeInstanceTerminating     = "InstanceTerminating"
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)

// IsEphemeralTaint reports taints that other components remove once a node
// is ready: scheduling looks past them on launching nodes, and a NodeClaim is
// not Initialized while any remains.
func IsEphemeralTaint(t corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, "node.cloudprovider.kubernetes.io/uninitialized", UnregisteredNoExecuteTaint.Key:
		return true
	}
	return strings.HasPrefix(t.Key, "readiness.k8s.io/")
}
