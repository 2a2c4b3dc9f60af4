package v1

// AnnotationInstanceTagged marks a NodeClaim whose instance carries the
// NodeClaim and Name tags, as Karpenter marks it, so that an instance the
// launch could not tag is tagged later, once.
const AnnotationInstanceTagged = Group + "/tagged"
