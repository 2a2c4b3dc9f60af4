package v1

import "testing"

func TestAMIFamily(t *testing.T) {
	custom := AMIFamilyCustom
	cases := []struct {
		name string
		spec EC2NodeClassSpec
		want string
	}{
		{"alias al2023", EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "al2023@latest"}}}, AMIFamilyAL2023},
		{"alias bottlerocket", EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "bottlerocket@v1.20.0"}}}, AMIFamilyBottlerocket},
		{"alias windows2025", EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{Alias: "windows2025@latest"}}}, AMIFamilyWindows2025},
		{"explicit family wins", EC2NodeClassSpec{AMIFamily: &custom, AMISelectorTerms: []AMISelectorTerm{{Alias: "al2023@latest"}}}, AMIFamilyCustom},
		{"no alias, no family", EC2NodeClassSpec{AMISelectorTerms: []AMISelectorTerm{{ID: "ami-123"}}}, AMIFamilyCustom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &EC2NodeClass{Spec: tc.spec}
			if got := nc.AMIFamily(); got != tc.want {
				t.Fatalf("AMIFamily() = %q, want %q", got, tc.want)
			}
		})
	}
}
