package v1

// AnnotationInstanceTagged marks a NodeClaim whose instance carries the
// NodeClaim and Name tags, as Karpenter marks it, so that an instance the
// launch could not tag is tagged later, once.
const AnnotationInstanceTagged = Group + "/tagged"

// AnnotationInstanceProfile names the instance profile a NodeClaim's
// instance launched with (Karpenter's annotation): the garbage collection
// of instance profiles keeps every profile a NodeClaim names, so a role
// change does not take credentials from nodes that launched before it.
const AnnotationInstanceProfile = Group + "/instance-profile-name"
