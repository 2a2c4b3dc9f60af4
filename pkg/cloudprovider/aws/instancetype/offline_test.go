package instancetype

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/catalog"
)

// TestOfClass: the catalog's types as a class's nodes report them are
// what Compute makes of EC2's own record of each type under the class,
// for classes that change the kubelet, the disks and the AMI family, on
// types with and without instance store, amd64 and arm64.
func TestOfClass(t *testing.T) {
	its, err := catalog.InstanceTypes(catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	raid0 := awsv1.InstanceStorePolicyRAID0
	class := func(spec awsv1.EC2NodeClassSpec) *awsv1.EC2NodeClass {
		if spec.AMISelectorTerms == nil {
			spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		}
		return &awsv1.EC2NodeClass{Spec: spec}
	}
	cases := []struct {
		name string
		nc   *awsv1.EC2NodeClass
	}{
		{"maxPods", class(awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(110)}})},
		{"podsPerCore", class(awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}})},
		{"reserved and eviction", class(awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{
			KubeReserved: map[string]string{"cpu": "250m", "memory": "1Gi"}, SystemReserved: map[string]string{"memory": "512Mi"},
			EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "15%"}}})},
		{"a 100Gi root volume", class(awsv1.EC2NodeClassSpec{BlockDeviceMappings: []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "100Gi", true)}})},
		{"RAID0 instance store", class(awsv1.EC2NodeClassSpec{InstanceStorePolicy: &raid0})},
		{"Bottlerocket", class(awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}})},
		{"Bottlerocket with maxPods", class(awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
			Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(58)}})},
	}
	types := []string{"m5.large", "c6a.2xlarge", "r6g.xlarge", "i3.large", "m5d.4xlarge"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := OfClass(its, c.nc)
			if err != nil {
				t.Fatal(err)
			}
			gotByName := map[string]*cloudprovider.InstanceType{}
			for _, it := range got {
				gotByName[it.Name] = it
			}
			for _, name := range types {
				_, _, want, err := Compute(motoInfo(t, name), InputsFor(c.nc, DefaultVMMemoryOverheadPercent, 0))
				if err != nil {
					t.Fatal(err)
				}
				if d := diffResources(gotByName[name].Allocatable, want); d != "" {
					t.Errorf("%s allocatable differs from Compute's of EC2's record:\n%s", name, d)
				}
			}
			if byName["m5.large"].Allocatable.Pods().Value() != 29 {
				t.Errorf("the catalog's own types changed: m5.large has %v pods", byName["m5.large"].Allocatable.Pods())
			}
		})
	}
	same, err := OfClass(its, class(awsv1.EC2NodeClassSpec{}))
	if err != nil || &same[0] != &its[0] {
		t.Errorf("a class of the defaults gave other types (err %v)", err)
	}
	if _, err := OfClass(its, &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "lots"}}}}); err == nil {
		t.Error("a kubeReserved that is not a quantity was accepted")
	}
}
