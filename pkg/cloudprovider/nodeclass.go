package cloudprovider

import (
	"context"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EC2NodeClass is the class a NodePool or NodeClaim refers to, or nil when
// it refers to none or the class does not exist (yet, or any more): callers
// then treat it as not ready rather than as an error.
func EC2NodeClass(ctx context.Context, r client.Reader, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return nil, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return class, nil
}
