package amifamily

import (
	"encoding/base64"
	"strings"
	"testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
)

// FuzzUserDataMerge merges any spec.userData with each family's bootstrap.
// It must never panic, must give the same answer twice (launch template
// names are hashes of it), and what it accepts must still bootstrap the
// node: AL2023's is a MIME document whose parts include Joiner's
// NodeConfig, AL2's runs bootstrap.sh, Bottlerocket's names the cluster.
func FuzzUserDataMerge(f *testing.F) {
	for _, s := range []string{shellScript, userNodeConfig, "", "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho hi\n--B--\n",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"\"\n\n", "[settings.kubernetes]\nmax-pods = 110\n", "[settings.kubernetes\n", "<powershell>Write-Host hi</powershell>",
		"[settings.kubernetes]\ncluster-name = 'other'\n"} {
		f.Add(s)
	}
	families := []string{awsv1.AMIFamilyAL2023, awsv1.AMIFamilyAL2, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyCustom}
	f.Fuzz(func(t *testing.T, userData string) {
		for _, family := range families {
			in := withUserData(baseInput(), userData)
			out, err := UserData(family, in)
			if err != nil {
				continue
			}
			again, _ := UserData(family, in)
			if again != out {
				t.Fatalf("%s: two merges of the same user data differ", family)
			}
			raw, err := base64.StdEncoding.DecodeString(out)
			if err != nil {
				t.Fatalf("%s: the result is not base64: %v", family, err)
			}
			s := string(raw)
			switch family {
			case awsv1.AMIFamilyAL2023:
				parts, err := parseMIME(s)
				if err != nil {
					t.Fatalf("AL2023: the merged user data is not MIME: %v\n%s", err, s)
				}
				if !strings.Contains(s, "kind: NodeConfig") || len(parts) == 0 {
					t.Fatalf("AL2023: the merged user data has no NodeConfig:\n%s", s)
				}
			case awsv1.AMIFamilyAL2:
				if !strings.Contains(s, "/etc/eks/bootstrap.sh") {
					t.Fatalf("AL2: the merged user data never bootstraps:\n%s", s)
				}
			case awsv1.AMIFamilyBottlerocket:
				if !strings.Contains(s, "demo") {
					t.Fatalf("Bottlerocket: the merged settings lost the cluster name:\n%s", s)
				}
			}
		}
	})
}

// FuzzParseAlias: an amiSelectorTerms alias of any text is refused with a
// message, or accepted as a family and a version that read back the same.
func FuzzParseAlias(f *testing.F) {
	for _, s := range []string{"al2023@latest", "al2023@v20240807", "bottlerocket@v1.20.0", "windows2022@latest", "windows2022@v1", "al2@", "@latest", "AL2023@latest", "al2023@latest@x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAlias(s)
		if err != nil {
			return
		}
		if a.Family == "" || a.Version == "" {
			t.Fatalf("%q accepted as %+v", s, a)
		}
		if _, version, _ := strings.Cut(s, "@"); version != a.Version {
			t.Fatalf("%q accepted with version %q", s, a.Version)
		}
	})
}
