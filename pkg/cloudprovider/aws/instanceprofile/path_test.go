package instanceprofile_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
)

// TestKarpentersPath: the profiles Joiner makes sit under Karpenter's IAM
// path, /karpenter/<region>/<cluster>/<class uid>/, written out here rather
// than through Path, and the profiles Karpenter made there (its own names)
// are found by Joiner's collection and by a class's finalizer.
func TestKarpentersPath(t *testing.T) {
	const classPath = "/karpenter/us-east-1/demo/uid-1/"
	ourTags := map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/demo": "owned"}
	cases := []struct {
		name string
		// karpenters is a profile Karpenter made under classPath ("": none).
		karpenters string
		// act is what Joiner does; gone are the profiles it must delete.
		act  func(ctx context.Context, p *instanceprofile.Provider) error
		gone bool
	}{
		{name: "Joiner's profile is made under Karpenter's path", act: func(ctx context.Context, p *instanceprofile.Provider) error {
			_, err := p.Ensure(ctx, withUID(withRole("OtherRole"), "uid-1"))
			return err
		}},
		{name: "collection deletes Karpenter's unused profile", karpenters: "demo_2864361935826373211", gone: true,
			act: func(ctx context.Context, p *instanceprofile.Provider) error {
				_, err := p.GarbageCollect(ctx, map[string]bool{})
				return err
			}},
		{name: "the finalizer deletes Karpenter's profile of the class", karpenters: "demo_2864361935826373211", gone: true,
			act: func(ctx context.Context, p *instanceprofile.Provider) error {
				return p.Delete(ctx, withUID(withRole("OtherRole"), "uid-1"))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			api, p := setup(t, "OtherRole")
			if tc.karpenters != "" {
				createAt(t, api, tc.karpenters, classPath, ourTags)
				addRole(t, api, tc.karpenters, "OtherRole")
			}
			if err := tc.act(ctx, p); err != nil {
				t.Fatal(err)
			}
			if tc.karpenters == "" {
				name := instanceprofile.Name("demo", "us-east-1", "default", "OtherRole")
				out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
				if err != nil {
					t.Fatal(err)
				}
				if got := aws.ToString(out.InstanceProfile.Path); got != classPath {
					t.Fatalf("profile %s is under %q, want Karpenter's %q", name, got, classPath)
				}
				return
			}
			if gone := get(t, api, tc.karpenters) == nil; gone != tc.gone {
				t.Fatalf("Karpenter's profile %s gone: %v, want %v", tc.karpenters, gone, tc.gone)
			}
		})
	}
}
