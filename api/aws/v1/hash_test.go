package v1

import "testing"

func TestEC2NodeClassHash(t *testing.T) {
	base := func() *EC2NodeClass {
		return &EC2NodeClass{Spec: EC2NodeClassSpec{Role: "node", AMISelectorTerms: []AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms: []SubnetSelectorTerm{{Tags: map[string]string{"k": "v"}}},
			BlockDeviceMappings: []*BlockDeviceMapping{bdm("/dev/xvda"), bdm("/dev/xvdb")},
			Kubelet:             &KubeletConfiguration{ClusterDNS: []string{"10.0.0.1", "10.0.0.2"}}}}
	}
	cases := []struct {
		name   string
		change func(*EC2NodeClass)
		drifts bool
	}{
		{"nothing", func(*EC2NodeClass) {}, false},
		{"tags", func(c *EC2NodeClass) { c.Spec.Tags = map[string]string{"team": "a"} }, true},
		{"role", func(c *EC2NodeClass) { c.Spec.Role = "other" }, true},
		{"AMI family through the alias", func(c *EC2NodeClass) { c.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "bottlerocket@latest"}} }, true},
		{"AMI version in the alias", func(c *EC2NodeClass) { c.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@v20240807"}} }, false},
		{"subnet selector", func(c *EC2NodeClass) { c.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{ID: "subnet-1"}} }, false},
		{"annotations", func(c *EC2NodeClass) { c.Annotations = map[string]string{"a": "b"} }, false},
		{"block device mappings reordered", func(c *EC2NodeClass) {
			c.Spec.BlockDeviceMappings = []*BlockDeviceMapping{bdm("/dev/xvdb"), bdm("/dev/xvda")}
		}, false},
		{"a block device mapping removed", func(c *EC2NodeClass) { c.Spec.BlockDeviceMappings = []*BlockDeviceMapping{bdm("/dev/xvda")} }, true},
		{"clusterDNS reordered", func(c *EC2NodeClass) {
			c.Spec.Kubelet = &KubeletConfiguration{ClusterDNS: []string{"10.0.0.2", "10.0.0.1"}}
		}, false},
		{"a clusterDNS address", func(c *EC2NodeClass) { c.Spec.Kubelet = &KubeletConfiguration{ClusterDNS: []string{"10.0.0.1"}} }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(c)
			if got := c.Hash() != base().Hash(); got != tc.drifts {
				t.Fatalf("hash changed = %v, want %v", got, tc.drifts)
			}
		})
	}
}

func bdm(device string) *BlockDeviceMapping { return &BlockDeviceMapping{DeviceName: &device} }
