package kwok

import (
	"context"
	"fmt"
	"sync"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instancetype"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationClassShaped marks a kwok Node whose capacity its EC2NodeClass
// shaped at launch (kubelet maxPods and reservations, block devices, AMI
// family): the Node's status, not the catalog, then describes the machine,
// since the class may have changed since.
const AnnotationClassShaped = "joiner.sh/kwok-class-shaped"

// The kwok machines are the catalog's types as an EC2NodeClass's nodes
// report them: the same instancetype.OfClass that joiner plan and joiner
// simulate use, the AWS provider's own Compute of the class against the
// catalog's defaults. So a class's kubelet settings hold in the demo and
// the tests as they do on AWS, rather than being accepted and ignored.

// shapes remembers each class's types by its UID and generation: the
// shaping runs Compute over every catalog type, and the provisioner asks
// for the types on every batch.
type shapes struct {
	mu      sync.Mutex
	byClass map[types.UID]shaped
}

type shaped struct {
	generation int64
	types      []*cloudprovider.InstanceType
	changed    bool
}

// typesFor are the types of the EC2NodeClass ref names, and whether the
// class changed them; the catalog when it names none (or none that
// exists: launches then wait for the class, see nodeClassReady).
func (c *CloudProvider) typesFor(ctx context.Context, ref *v1.NodeClassReference) ([]*cloudprovider.InstanceType, bool, error) {
	class, err := cloudprovider.EC2NodeClass(ctx, c.opts.NodeClasses, ref)
	if err != nil || class == nil {
		return c.types, false, err
	}
	return c.shape(class)
}

func (c *CloudProvider) shape(class *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, bool, error) {
	c.shapes.mu.Lock()
	defer c.shapes.mu.Unlock()
	if s, ok := c.shapes.byClass[class.UID]; ok && s.generation == class.Generation {
		return s.types, s.changed, nil
	}
	its, err := instancetype.OfClass(c.types, class)
	if err != nil {
		return nil, false, fmt.Errorf("kwok cloud provider: %w", err)
	}
	// OfClass returns the catalog itself when the class shapes nothing.
	changed := len(its) > 0 && its[0] != c.types[0]
	if c.shapes.byClass == nil {
		c.shapes.byClass = map[types.UID]shaped{}
	}
	c.shapes.byClass[class.UID] = shaped{generation: class.Generation, types: its, changed: changed}
	return its, changed, nil
}
