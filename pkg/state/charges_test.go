package state_test

import (
	"context"
	"math"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/kwok"
	"github.com/joiner-autoscaler/joiner/pkg/operator"
	"github.com/joiner-autoscaler/joiner/pkg/spendcap"
	"github.com/joiner-autoscaler/joiner/pkg/state"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// billed is a provider whose bill gives some NodeClaims other prices.
type billed struct {
	cloudprovider.CloudProvider
	effective map[string]float64
}

func (b billed) Bill(context.Context) (cloudprovider.Bill, error) {
	return cloudprovider.Bill{Effective: b.effective}, nil
}

// TestSnapshotCountsSpendAgainstTheCap: the nodes of a pool with a spend
// cap count against it what they cost: a launched NodeClaim its offering's
// list price, or what the bill says it costs under the commitments; one
// still launching the dearest offering its requirements allow (it may
// land on any). A pool without a cap counts nothing, and a cap that is not
// a price leaves the pool out, saying why.
func TestSnapshotCountsSpendAgainstTheCap(t *testing.T) {
	scheme := operator.Scheme()
	kube0 := fake.NewClientBuilder().WithScheme(scheme).Build()
	catalog, err := kwok.New(kube0, kwok.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool0, _ := readyPool()
	its, err := catalog.InstanceTypes(context.Background(), pool0)
	if err != nil {
		t.Fatal(err)
	}
	price := func(typ, zone, ct string) float64 {
		for _, it := range its {
			for _, o := range it.Offerings {
				if it.Name == typ && (zone == "" || o.Zone == zone) && o.CapacityType == ct {
					return o.Price
				}
			}
		}
		t.Fatalf("no %s %s offering of %s", ct, zone, typ)
		return 0
	}
	var zone string
	for _, o := range its[0].Offerings {
		zone = o.Zone
	}
	launched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "launched", Labels: map[string]string{v1.LabelNodePool: "default",
		corev1.LabelInstanceTypeStable: "c6a.large", corev1.LabelTopologyZone: zone, v1.LabelCapacityType: "on-demand"}}}
	launching := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "launching", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.large", "c6a.xlarge"}},
			{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}}}}
	cases := []struct {
		name      string
		cap       string
		effective map[string]float64
		want      float64
		wantLeft  bool
	}{
		{name: "no cap", want: 0},
		{name: "list prices", cap: "5", want: price("c6a.large", zone, "on-demand") + price("c6a.xlarge", "", "on-demand")},
		{name: "the bill's price", cap: "5", effective: map[string]float64{"launched": 0.01}, want: 0.01 + price("c6a.xlarge", "", "on-demand")},
		{name: "not a price", cap: "lots", wantLeft: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool, class := readyPool()
			if tc.cap != "" {
				pool.Annotations = map[string]string{spendcap.Annotation: tc.cap}
			}
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool, class, launched.DeepCopy(), launching.DeepCopy()).
				WithStatusSubresource(&v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
			provider, err := kwok.New(kube, kwok.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snap, problems, err := (&state.Cluster{Client: kube, CloudProvider: billed{provider, tc.effective}}).Snapshot(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLeft {
				if len(snap.NodePools) != 0 || len(problems) != 1 || problems[0].Reason == "" {
					t.Fatalf("a pool with an invalid cap planned (problems %v)", problems)
				}
				return
			}
			q := snap.NodePools[0].InUse[spendcap.Resource]
			if got := spendcap.Dollars(q.Value()); math.Abs(got-tc.want) > 2e-6 {
				t.Errorf("the pool's nodes count $%.6f/h against its cap, want $%.6f/h", got, tc.want)
			}
		})
	}
}
