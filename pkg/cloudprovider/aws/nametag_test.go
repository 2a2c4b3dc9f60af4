package aws

import (
	"reflect"
	"testing"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instance"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
)

// The class's tags may name the instance (tags: {Name: ...}); that name is
// the user's and stays. Without one, the instance is named after its node.
func TestCreateKeepsTheClassesName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tags     map[string]string
		wantTags map[string]string
	}{
		{"no Name: the node's", map[string]string{"team": "payments"}, map[string]string{tags.NodeClaim: "default-abcde", tags.Name: "ip-10-0-1-23.ec2.internal"}},
		{"the class's Name stays", map[string]string{tags.Name: "demo-spot-node"}, map[string]string{tags.NodeClaim: "default-abcde"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			described := &instance.Instance{ID: "i-0123456789abcdef0", Type: "m5.large", Zone: zoneA, CapacityType: spot, SubnetID: "subnet-a",
				PrivateDNS: "ip-10-0-1-23.ec2.internal", State: "running", Tags: tc.tags}
			f := &fakes{instanceTypes: &fakeInstanceTypes{types: launchCatalog()}, instances: &fakeInstances{described: map[string]*instance.Instance{described.ID: described}}}
			p := newProvider(t, kubeWith(t, readyClass()), f)
			if _, _, err := createStepping(t, p, f, nodeClaim()); err != nil {
				t.Fatal(err)
			}
			if want := []map[string]string{tc.wantTags}; !reflect.DeepEqual(f.instances.tags, want) {
				t.Errorf("tagged %v, want %v", f.instances.tags, want)
			}
		})
	}
}
