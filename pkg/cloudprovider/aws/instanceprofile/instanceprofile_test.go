package instanceprofile_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/instanceprofile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

const assumeEC2 = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

func setup(t *testing.T, roles ...string) (*iam.Client, *instanceprofile.Provider) {
	t.Helper()
	mototest.Current().Reset(t)
	clients := mototest.Clients(t, "")
	for _, r := range roles {
		if _, err := clients.IAM.CreateRole(context.Background(), &iam.CreateRoleInput{RoleName: aws.String(r), AssumeRolePolicyDocument: aws.String(assumeEC2)}); err != nil {
			t.Fatal(err)
		}
	}
	return clients.IAM, &instanceprofile.Provider{IAM: clients.IAM, ClusterName: "demo", Region: "us-east-1"}
}

func withRole(role string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{Role: role}}
}

func withProfile(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{InstanceProfile: aws.String(name)}}
}

type profile struct {
	roles []string
	tags  map[string]string
}

func get(t *testing.T, api *iam.Client, name string) *profile {
	t.Helper()
	out, err := api.GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	p := &profile{tags: map[string]string{}}
	for _, r := range out.InstanceProfile.Roles {
		p.roles = append(p.roles, aws.ToString(r.RoleName))
	}
	for _, tg := range out.InstanceProfile.Tags {
		p.tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return p
}

func TestEnsureWithRole(t *testing.T) {
	want := instanceprofile.Name("demo", "us-east-1", "default", "KarpenterNodeRole-demo")
	cases := []struct {
		name string
		// before runs first, with the roles KarpenterNodeRole-demo and OtherRole existing.
		before    func(t *testing.T, api *iam.Client)
		role      string
		wantRoles []string
		// wantErr and wantReason when Ensure must fail.
		wantErr    []string
		wantReason string
	}{
		{name: "creates the profile with the role", role: "KarpenterNodeRole-demo", wantRoles: []string{"KarpenterNodeRole-demo"}},
		{name: "a role ARN names the role", role: "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo", wantRoles: []string{"KarpenterNodeRole-demo"}},
		{name: "replaces a different role", role: "KarpenterNodeRole-demo", wantRoles: []string{"KarpenterNodeRole-demo"},
			before: func(t *testing.T, api *iam.Client) {
				create(t, api, want, nil)
				addRole(t, api, want, "OtherRole")
			}},
		{name: "tags a profile that lacks them", role: "KarpenterNodeRole-demo", wantRoles: []string{"KarpenterNodeRole-demo"},
			before: func(t *testing.T, api *iam.Client) { create(t, api, want, nil) }},
		{name: "a role that does not exist", role: "NoSuchRole", wantReason: "RoleNotFound",
			wantErr: []string{`spec.role: "NoSuchRole" does not exist`, "create the role", "fix spec.role"}},
		{name: "a new role that does not exist keeps the old one", role: "NoSuchRole", wantReason: "RoleNotFound", wantRoles: []string{"OtherRole"},
			wantErr: []string{`spec.role: "NoSuchRole" does not exist`},
			before: func(t *testing.T, api *iam.Client) {
				create(t, api, want, nil)
				addRole(t, api, want, "OtherRole")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, p := setup(t, "KarpenterNodeRole-demo", "OtherRole")
			if tc.before != nil {
				tc.before(t, api)
			}
			got, err := p.Ensure(context.Background(), withRole(tc.role))
			if tc.wantErr != nil {
				var nf *instanceprofile.NotFoundError
				if !errors.As(err, &nf) || nf.Reason() != tc.wantReason {
					t.Fatalf("want a %s NotFoundError, got %v", tc.wantReason, err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("name %q, want %q", got, want)
				}
			}
			prof := get(t, api, want)
			if prof == nil {
				if tc.wantRoles != nil {
					t.Fatal("no profile")
				}
				return // a role that does not exist leaves no empty profile behind
			}
			if !reflect.DeepEqual(prof.roles, tc.wantRoles) {
				t.Errorf("roles %v, want %v", prof.roles, tc.wantRoles)
			}
			if tc.wantErr != nil {
				return
			}
			wantTags := map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/demo": "owned",
				"eks:eks-cluster-name": "demo", "karpenter.sh/managed-by": "demo", "topology.kubernetes.io/region": "us-east-1"}
			if !reflect.DeepEqual(prof.tags, wantTags) {
				t.Errorf("tags %v, want %v", prof.tags, wantTags)
			}
		})
	}
}

func create(t *testing.T, api *iam.Client, name string, tags map[string]string) {
	t.Helper()
	createAt(t, api, name, "", tags)
}

// createAt creates the profile under path ("" for "/").
func createAt(t *testing.T, api *iam.Client, name, path string, tags map[string]string) {
	t.Helper()
	in := &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)}
	if path != "" {
		in.Path = aws.String(path)
	}
	for k, v := range tags {
		in.Tags = append(in.Tags, iamTag(k, v))
	}
	if _, err := api.CreateInstanceProfile(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func addRole(t *testing.T, api *iam.Client, name, role string) {
	t.Helper()
	if _, err := api.AddRoleToInstanceProfile(context.Background(), &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
}

// A second Ensure changes nothing: one create, one role add in all.
func TestEnsureIsIdempotent(t *testing.T) {
	_, p := setup(t, "KarpenterNodeRole-demo")
	front := mototest.Current()
	for i := 0; i < 3; i++ {
		if _, err := p.Ensure(context.Background(), withRole("KarpenterNodeRole-demo")); err != nil {
			t.Fatal(err)
		}
	}
	for action, want := range map[string]int{"CreateInstanceProfile": 1, "AddRoleToInstanceProfile": 1, "TagInstanceProfile": 0, "RemoveRoleFromInstanceProfile": 0} {
		if n := front.Calls("iam", action); n != want {
			t.Errorf("%s called %d times, want %d", action, n, want)
		}
	}
}

func TestEnsureWithInstanceProfile(t *testing.T) {
	cases := []struct {
		name    string
		exists  bool
		wantErr []string
	}{
		{name: "used as given", exists: true},
		{name: "missing", wantErr: []string{`spec.instanceProfile: "MyProfile" does not exist`, "create it, or set spec.role"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, p := setup(t, "OtherRole")
			if tc.exists {
				create(t, api, "MyProfile", nil)
				addRole(t, api, "MyProfile", "OtherRole")
			}
			got, err := p.Ensure(context.Background(), withProfile("MyProfile"))
			if tc.wantErr != nil {
				var nf *instanceprofile.NotFoundError
				if !errors.As(err, &nf) || nf.Reason() != "InstanceProfileNotFound" {
					t.Fatalf("want an InstanceProfileNotFound error, got %v", err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil || got != "MyProfile" {
				t.Fatalf("got %q, %v", got, err)
			}
			prof := get(t, api, "MyProfile")
			if !reflect.DeepEqual(prof.roles, []string{"OtherRole"}) || len(prof.tags) != 0 {
				t.Errorf("a given profile was changed: %+v", prof)
			}
			if n := mototest.Current().Calls("iam", "CreateInstanceProfile"); n != 1 {
				t.Errorf("%d profiles created, want only the fixture's", n)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	ours := instanceprofile.Name("demo", "us-east-1", "default", "OtherRole")
	ourTags := map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/demo": "owned"}
	cases := []struct {
		name string
		nc   *awsv1.EC2NodeClass
		// setup creates profiles: name -> tags; each gets OtherRole.
		profiles map[string]map[string]string
		// paths are the IAM paths of profiles not under "/".
		paths map[string]string
		// gone and kept are profile names after Delete.
		gone, kept []string
	}{
		{name: "removes the role and the profile it created", nc: withRole("OtherRole"), profiles: map[string]map[string]string{ours: ourTags}, gone: []string{ours}},
		{name: "nothing to delete", nc: withRole("OtherRole")},
		{name: "never a profile given in spec.instanceProfile", nc: withProfile("MyProfile"), profiles: map[string]map[string]string{"MyProfile": nil}, kept: []string{"MyProfile"}},
		{name: "its own, still in status, after a switch to spec.instanceProfile", nc: inStatus(withProfile("MyProfile"), ours),
			profiles: map[string]map[string]string{"MyProfile": nil, ours: ourTags}, kept: []string{"MyProfile"}, gone: []string{ours}},
		{name: "the one it made before profiles were per role", nc: withRole("OtherRole"),
			profiles: map[string]map[string]string{instanceprofile.Name("demo", "us-east-1", "default", ""): ourTags}, gone: []string{instanceprofile.Name("demo", "us-east-1", "default", "")}},
		{name: "not a profile of its name it did not tag", nc: withRole("OtherRole"), profiles: map[string]map[string]string{ours: nil}, kept: []string{ours}},
		{name: "an earlier role's, under the class's path", nc: withUID(withRole("OtherRole"), "uid-1"),
			profiles: map[string]map[string]string{"demo_earlier": ourTags, "demo_of_another_class": ourTags},
			paths:    map[string]string{"demo_earlier": instanceprofile.Path("us-east-1", "demo", "uid-1"), "demo_of_another_class": instanceprofile.Path("us-east-1", "demo", "uid-2")},
			gone:     []string{"demo_earlier"}, kept: []string{"demo_of_another_class"}},
		{name: "not another cluster's", nc: withRole("OtherRole"),
			profiles: map[string]map[string]string{ours: {"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/other": "owned"}}, kept: []string{ours}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, p := setup(t, "OtherRole")
			for name, tags := range tc.profiles {
				createAt(t, api, name, tc.paths[name], tags)
				addRole(t, api, name, "OtherRole")
			}
			if err := p.Delete(context.Background(), tc.nc); err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.gone {
				if get(t, api, n) != nil {
					t.Errorf("profile %s still exists", n)
				}
			}
			for _, n := range tc.kept {
				if prof := get(t, api, n); prof == nil || !reflect.DeepEqual(prof.roles, []string{"OtherRole"}) {
					t.Errorf("profile %s was changed: %+v", n, prof)
				}
			}
		})
	}
}

func TestName(t *testing.T) {
	long := strings.Repeat("c", 100)
	longClass := strings.Repeat("k", 253)
	names := map[string]bool{}
	for _, in := range [][4]string{
		{"demo", "us-east-1", "default", ""},
		{"demo", "us-east-1", "default", "KarpenterNodeRole-demo"},
		{"demo", "us-east-1", "default", "OtherRole"},
		{"demo", "us-west-2", "default", ""},
		{"demo", "us-east-1", "gpu", ""},
		{"other", "us-east-1", "default", ""},
		{long, "us-east-1", longClass, ""},
		{long, "us-east-1", longClass + "x", ""},
		{"demo", "us-east-1", "a.b", ""},
	} {
		n := instanceprofile.Name(in[0], in[1], in[2], in[3])
		if n != instanceprofile.Name(in[0], in[1], in[2], in[3]) {
			t.Errorf("%v: not deterministic", in)
		}
		if len(n) > 128 {
			t.Errorf("%v: %d characters, over IAM's 128", in, len(n))
		}
		if !regexp.MustCompile(`^[\w+=,.@-]+$`).MatchString(n) {
			t.Errorf("%v: %q has characters IAM refuses", in, n)
		}
		if names[n] {
			t.Errorf("%v: %q collides", in, n)
		}
		names[n] = true
	}
	if n := instanceprofile.Name("demo", "us-east-1", "default", "KarpenterNodeRole-demo"); !strings.HasPrefix(n, "demo_default_") {
		t.Errorf("%q does not start with cluster and class", n)
	}
}

func iamTag(k, v string) iamtypes.Tag { return iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)} }

// recordingIAM keeps the tags of each create and tag request.
type recordingIAM struct {
	*iam.Client
	requests []map[string]string
}

func (r *recordingIAM) CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, opts ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error) {
	r.record(in.Tags)
	return r.Client.CreateInstanceProfile(ctx, in, opts...)
}

func (r *recordingIAM) TagInstanceProfile(ctx context.Context, in *iam.TagInstanceProfileInput, opts ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error) {
	r.record(in.Tags)
	return r.Client.TagInstanceProfile(ctx, in, opts...)
}

func (r *recordingIAM) record(tags []iamtypes.Tag) {
	m := map[string]string{}
	for _, tg := range tags {
		m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	r.requests = append(r.requests, m)
}

// Karpenter's published controller policy allows iam:CreateInstanceProfile
// and iam:TagInstanceProfile only when the request itself carries these
// four tags (aws:RequestTag conditions, StringEquals and StringLike): a
// request short of one is refused, and the class never becomes Ready.
func TestRequestsCarryThePolicysTags(t *testing.T) {
	name := instanceprofile.Name("demo", "us-east-1", "default", "KarpenterNodeRole-demo")
	policyTags := map[string]string{"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo",
		"topology.kubernetes.io/region": "us-east-1", "karpenter.k8s.aws/ec2nodeclass": "default"}
	cases := []struct {
		name     string
		existing map[string]string // the profile's tags before; nil: no profile
		requests int
	}{
		{name: "a new profile", requests: 1},
		{name: "a profile an older version made, without eks:eks-cluster-name", requests: 1,
			existing: map[string]string{"kubernetes.io/cluster/demo": "owned", "topology.kubernetes.io/region": "us-east-1",
				"karpenter.k8s.aws/ec2nodeclass": "default", "karpenter.sh/managed-by": "demo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api, p := setup(t, "KarpenterNodeRole-demo")
			if tc.existing != nil {
				create(t, api, name, tc.existing)
			}
			rec := &recordingIAM{Client: api}
			p.IAM = rec
			if _, err := p.Ensure(context.Background(), withRole("KarpenterNodeRole-demo")); err != nil {
				t.Fatal(err)
			}
			if len(rec.requests) != tc.requests {
				t.Fatalf("%d create or tag requests, want %d", len(rec.requests), tc.requests)
			}
			for _, req := range rec.requests {
				for k, v := range policyTags {
					if req[k] != v {
						t.Errorf("request tags %v: %s is %q, want %q", req, k, req[k], v)
					}
				}
			}
		})
	}
}

// TestEnsureKeepsAndRolls: the profile in status is kept while it holds the
// role, whoever made it (a class Karpenter managed keeps Karpenter's
// profile); a new role gets a new profile, and the old one keeps its role
// for the nodes launched with it.
func TestEnsureKeepsAndRolls(t *testing.T) {
	karpenters := map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/demo": "owned",
		"karpenter.sh/managed-by": "demo", "topology.kubernetes.io/region": "us-east-1"}
	t.Run("keeps the status profile that holds the role", func(t *testing.T) {
		api, p := setup(t, "KarpenterNodeRole-demo")
		create(t, api, "demo_2864361935826373211", karpenters)
		addRole(t, api, "demo_2864361935826373211", "KarpenterNodeRole-demo")
		nc := withRole("KarpenterNodeRole-demo")
		nc.Status.InstanceProfile = "demo_2864361935826373211"
		got, err := p.Ensure(context.Background(), nc)
		if err != nil || got != "demo_2864361935826373211" {
			t.Fatalf("Ensure = %q, %v; want Karpenter's profile kept", got, err)
		}
		if get(t, api, instanceprofile.Name("demo", "us-east-1", "default", "KarpenterNodeRole-demo")) != nil {
			t.Fatal("a second profile was made")
		}
	})
	t.Run("a new role gets a new profile", func(t *testing.T) {
		api, p := setup(t, "KarpenterNodeRole-demo", "OtherRole")
		old := instanceprofile.Name("demo", "us-east-1", "default", "OtherRole")
		create(t, api, old, karpenters)
		addRole(t, api, old, "OtherRole")
		nc := withRole("KarpenterNodeRole-demo")
		nc.Status.InstanceProfile = old
		got, err := p.Ensure(context.Background(), nc)
		want := instanceprofile.Name("demo", "us-east-1", "default", "KarpenterNodeRole-demo")
		if err != nil || got != want {
			t.Fatalf("Ensure = %q, %v; want %s", got, err, want)
		}
		if prof := get(t, api, want); prof == nil || !reflect.DeepEqual(prof.roles, []string{"KarpenterNodeRole-demo"}) {
			t.Fatalf("the new profile is %+v", prof)
		}
		if prof := get(t, api, old); prof == nil || !reflect.DeepEqual(prof.roles, []string{"OtherRole"}) {
			t.Fatalf("the old profile is %+v; its nodes' role was swapped", prof)
		}
	})
}

func withUID(nc *awsv1.EC2NodeClass, uid string) *awsv1.EC2NodeClass {
	nc.UID = types.UID(uid)
	return nc
}

func inStatus(nc *awsv1.EC2NodeClass, profile string) *awsv1.EC2NodeClass {
	nc.Status.InstanceProfile = profile
	return nc
}
