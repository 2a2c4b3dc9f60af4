package kwok

import (
	"context"
	"fmt"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IsDrifted reports NodeClassDrift when the EC2NodeClass changed since the
// machine launched: the hash stamped on the NodeClaim differs from the
// class's current hash. A hash stamped under another hash version is not
// comparable and is not drift; the NodeClaim disruption controller re-stamps
// it. The class's hash is computed, not read from its annotation, which
// lags a spec change by a reconcile and would meanwhile drift the NodeClaims
// launched from the new spec. A kwok machine has no image, subnets or
// security groups that could drift on their own.
func (c *CloudProvider) IsDrifted(ctx context.Context, nodeClaim *v1.NodeClaim) (string, error) {
	class, err := c.nodeClass(ctx, nodeClaim)
	if err != nil || class == nil {
		return "", err
	}
	if awsv1.HashDrifted(class, nodeClaim) {
		return awsv1.ReasonNodeClassDrift, nil
	}
	return "", nil
}

// nodeClass is the EC2NodeClass a NodeClaim refers to, or nil when it
// refers to none.
func (c *CloudProvider) nodeClass(ctx context.Context, nodeClaim *v1.NodeClaim) (*awsv1.EC2NodeClass, error) {
	return cloudprovider.EC2NodeClass(ctx, c.opts.NodeClasses, nodeClaim.Spec.NodeClassRef)
}

// stampNodeClass stamps the class's current hash, under the current hash
// version, on the NodeClaim Create returns, so drift can be judged later.
func (c *CloudProvider) stampNodeClass(ctx context.Context, out *v1.NodeClaim) error {
	class, err := c.nodeClass(ctx, out)
	if err != nil || class == nil {
		return err
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
	out.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	return nil
}

// nodeClassReady refuses a launch while the NodeClaim's EC2NodeClass does
// not exist or has a Ready condition that is False, as Karpenter's kwok
// provider refuses it: the lifecycle controller then deletes the NodeClaim
// rather than launching a machine its class cannot make. A class whose
// readiness is not reported yet (no condition, or Unknown) does not block
// the launch, and neither does a reference to another kind of class.
func (c *CloudProvider) nodeClassReady(ctx context.Context, nodeClaim *v1.NodeClaim) error {
	ref := nodeClaim.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.opts.NodeClasses.Get(ctx, types.NamespacedName{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return &cloudprovider.NodeClassNotReadyError{Err: fmt.Errorf("EC2NodeClass %s not found", ref.Name)}
		}
		return err
	}
	if ready := meta.FindStatusCondition(class.Status.Conditions, "Ready"); ready != nil && ready.Status == metav1.ConditionFalse {
		return &cloudprovider.NodeClassNotReadyError{Err: fmt.Errorf("EC2NodeClass %s is not ready: %s: %s", class.Name, ready.Reason, ready.Message)}
	}
	return nil
}
