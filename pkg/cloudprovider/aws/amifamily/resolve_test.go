package amifamily

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/internal/mototest"
)

// motoImages are the images moto serves in this package's tests.
var motoImages = []map[string]any{
	{"ami_id": "ami-0a2023x86", "name": "amazon-eks-node-al2023-x86_64-standard-1.31-v20250101", "architecture": "x86_64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0a2023arm", "name": "amazon-eks-node-al2023-arm64-standard-1.31-v20250101", "architecture": "arm64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0a2023nvidia", "name": "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20250101", "architecture": "x86_64", "creation_date": "2025-01-02T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0a2023neuron", "name": "amazon-eks-node-al2023-x86_64-neuron-1.31-v20250101", "architecture": "x86_64", "creation_date": "2025-01-03T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0al2x86", "name": "amazon-eks-node-1.31-v20250101", "architecture": "x86_64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0al2gpu", "name": "amazon-eks-gpu-node-1.31-v20250101", "architecture": "x86_64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "602401143452"},
	{"ami_id": "ami-0brx86", "name": "bottlerocket-aws-k8s-1.31-x86_64-v1.30.0", "architecture": "x86_64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "092701018921"},
	{"ami_id": "ami-0brnvarm", "name": "bottlerocket-aws-k8s-1.31-nvidia-aarch64-v1.30.0", "architecture": "arm64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "092701018921"},
	{"ami_id": "ami-0win2022", "name": "Windows_Server-2022-English-Core-EKS_Optimized-1.31-2025.01.01", "architecture": "x86_64", "platform": "windows", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "801119661308"},
	{"ami_id": "ami-0team2024", "name": "team-base-2024", "architecture": "x86_64", "creation_date": "2024-01-01T00:00:00.000Z", "owner_id": "123456789012", "tags": map[string]string{"team": "a"}},
	{"ami_id": "ami-0team2025", "name": "team-base-2025", "architecture": "x86_64", "creation_date": "2025-01-01T00:00:00.000Z", "owner_id": "210987654321", "tags": map[string]string{"team": "a"}},
	{"ami_id": "ami-0teamarm", "name": "team-base-arm-2024", "architecture": "arm64", "creation_date": "2024-06-01T00:00:00.000Z", "owner_id": "123456789012", "tags": map[string]string{"team": "a", "stage": "prod"}},
	{"ami_id": "ami-0team386", "name": "team-base-i386", "architecture": "i386", "creation_date": "2026-01-01T00:00:00.000Z", "owner_id": "123456789012", "tags": map[string]string{"team": "a"}},
	{"ami_id": "ami-0teampend", "name": "team-base-pending", "architecture": "x86_64", "state": "pending", "creation_date": "2026-01-01T00:00:00.000Z", "owner_id": "123456789012", "tags": map[string]string{"team": "a"}},
}

func TestMain(m *testing.M) { os.Exit(mototest.Main(m, mototest.WithAMIs(motoImages))) }

// fakeSSM serves the public parameters moto lacks (it refuses writes under
// /aws/service/), answering GetParameter as SSM does: a missing name is
// ParameterNotFound.
type fakeSSM struct {
	mu     sync.Mutex
	params map[string]string
	calls  int
	err    error
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	name := aws.ToString(in.Name)
	v, ok := f.params[name]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{Message: aws.String(name)}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: aws.String(name), Value: aws.String(v)}}, nil
}

func arch(a string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{a}}
}

func reqs(a string, v ...variant) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{arch(a)}
	for _, vv := range v {
		out = append(out, vv.requirements()...)
	}
	return out
}

func class(terms ...awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: terms}}
}

const eks = "/aws/service/eks/optimized-ami/1.31"

func TestResolve(t *testing.T) {
	cases := []struct {
		name    string
		class   *awsv1.EC2NodeClass
		k8s     string
		params  map[string]string
		want    []awsv1.AMI
		wantErr string
	}{{
		name:  "al2023@latest reads every architecture and variant; one that is not published is skipped",
		class: class(awsv1.AMISelectorTerm{Alias: "al2023@latest"}),
		params: map[string]string{
			eks + "/amazon-linux-2023/x86_64/standard/recommended/image_id": "ami-0a2023x86",
			eks + "/amazon-linux-2023/arm64/standard/recommended/image_id":  "ami-0a2023arm",
			eks + "/amazon-linux-2023/x86_64/nvidia/recommended/image_id":   "ami-0a2023nvidia",
			eks + "/amazon-linux-2023/x86_64/neuron/recommended/image_id":   "ami-0a2023neuron",
		},
		want: []awsv1.AMI{
			{ID: "ami-0a2023neuron", Name: "amazon-eks-node-al2023-x86_64-neuron-1.31-v20250101", Requirements: reqs("amd64", variantNeuron)},
			{ID: "ami-0a2023nvidia", Name: "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20250101", Requirements: reqs("amd64", variantNvidia)},
			{ID: "ami-0a2023arm", Name: "amazon-eks-node-al2023-arm64-standard-1.31-v20250101", Requirements: reqs("arm64", variantStandard)},
			{ID: "ami-0a2023x86", Name: "amazon-eks-node-al2023-x86_64-standard-1.31-v20250101", Requirements: reqs("amd64", variantStandard)},
		},
	}, {
		name:  "al2023 pinned reads the versioned parameter names",
		class: class(awsv1.AMISelectorTerm{Alias: "al2023@v20250101"}),
		params: map[string]string{
			eks + "/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20250101/image_id": "ami-0a2023x86",
			eks + "/amazon-linux-2023/x86_64/standard/recommended/image_id":                                           "ami-0a2023nvidia",
		},
		want: []awsv1.AMI{
			{ID: "ami-0a2023x86", Name: "amazon-eks-node-al2023-x86_64-standard-1.31-v20250101", Requirements: reqs("amd64", variantStandard)},
		},
	}, {
		name:  "al2's GPU image serves both NVIDIA and Neuron types",
		class: class(awsv1.AMISelectorTerm{Alias: "al2@v20250101"}),
		params: map[string]string{
			eks + "/amazon-linux-2/amazon-eks-node-1.31-v20250101/image_id":         "ami-0al2x86",
			eks + "/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20250101/image_id": "ami-0al2gpu",
		},
		want: []awsv1.AMI{
			{ID: "ami-0al2gpu", Name: "amazon-eks-gpu-node-1.31-v20250101", Requirements: reqs("amd64", variantNeuron)},
			{ID: "ami-0al2gpu", Name: "amazon-eks-gpu-node-1.31-v20250101", Requirements: reqs("amd64", variantNvidia)},
			{ID: "ami-0al2x86", Name: "amazon-eks-node-1.31-v20250101", Requirements: reqs("amd64", variantStandard)},
		},
	}, {
		name:    "al2 is not published for 1.33",
		class:   class(awsv1.AMISelectorTerm{Alias: "al2@latest"}),
		k8s:     "1.33",
		wantErr: `amiSelectorTerms[0] (alias "al2@latest"): alias "al2@latest": Amazon Linux 2 AMIs are not published for Kubernetes 1.33`,
	}, {
		name:  "bottlerocket drops the v of a pinned version",
		class: class(awsv1.AMISelectorTerm{Alias: "bottlerocket@v1.30.0"}),
		params: map[string]string{
			"/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.30.0/image_id":       "ami-0brx86",
			"/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.30.0/image_id": "ami-0brnvarm",
		},
		want: []awsv1.AMI{
			{ID: "ami-0brnvarm", Name: "bottlerocket-aws-k8s-1.31-nvidia-aarch64-v1.30.0", Requirements: reqs("arm64", variantNvidia)},
			{ID: "ami-0brx86", Name: "bottlerocket-aws-k8s-1.31-x86_64-v1.30.0", Requirements: reqs("amd64", variantStandard)},
			{ID: "ami-0brx86", Name: "bottlerocket-aws-k8s-1.31-x86_64-v1.30.0", Requirements: reqs("amd64", variantNeuron)},
		},
	}, {
		name:   "windows2022 selects Windows nodes of its build",
		class:  class(awsv1.AMISelectorTerm{Alias: "windows2022@latest"}),
		params: map[string]string{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id": "ami-0win2022"},
		want: []awsv1.AMI{{ID: "ami-0win2022", Name: "Windows_Server-2022-English-Core-EKS_Optimized-1.31-2025.01.01", Requirements: []corev1.NodeSelectorRequirement{
			arch("amd64"),
			{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
			{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.20348"}},
		}}},
	}, {
		name:    "an alias none of whose parameters exist names the term and the paths",
		class:   class(awsv1.AMISelectorTerm{Alias: "al2023@v19990101"}),
		wantErr: `AMISelector did not match any AMIs: amiSelectorTerms[0] (alias "al2023@v19990101"): none of its SSM parameters exist in this region (/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v19990101/image_id, `,
	}, {
		name:    "an alias whose images EC2 does not know says so",
		class:   class(awsv1.AMISelectorTerm{Alias: "al2023@latest"}),
		params:  map[string]string{eks + "/amazon-linux-2023/x86_64/standard/recommended/image_id": "ami-0gone"},
		wantErr: `amiSelectorTerms[0] (alias "al2023@latest"): SSM names ami-0gone, but DescribeImages finds no available image with that id`,
	}, {
		name:  "tags: the newest per architecture; i386 and pending images are skipped",
		class: class(awsv1.AMISelectorTerm{Tags: map[string]string{"team": "a"}}),
		want: []awsv1.AMI{
			{ID: "ami-0team2025", Name: "team-base-2025", Requirements: reqs("amd64")},
			{ID: "ami-0teamarm", Name: "team-base-arm-2024", Requirements: reqs("arm64")},
		},
	}, {
		name:  "tags within a term are ANDed; * matches any value",
		class: class(awsv1.AMISelectorTerm{Tags: map[string]string{"team": "a", "stage": "*"}}),
		want:  []awsv1.AMI{{ID: "ami-0teamarm", Name: "team-base-arm-2024", Requirements: reqs("arm64")}},
	}, {
		name:  "an exact name",
		class: class(awsv1.AMISelectorTerm{Name: "team-base-2024"}),
		want:  []awsv1.AMI{{ID: "ami-0team2024", Name: "team-base-2024", Requirements: reqs("amd64")}},
	}, {
		name:  "a name pattern with an owner",
		class: class(awsv1.AMISelectorTerm{Name: "team-base-*", Owner: "123456789012"}),
		want: []awsv1.AMI{
			{ID: "ami-0teamarm", Name: "team-base-arm-2024", Requirements: reqs("arm64")},
			{ID: "ami-0team2024", Name: "team-base-2024", Requirements: reqs("amd64")},
		},
	}, {
		name:  "an id",
		class: class(awsv1.AMISelectorTerm{ID: "ami-0team2024"}),
		want:  []awsv1.AMI{{ID: "ami-0team2024", Name: "team-base-2024", Requirements: reqs("amd64")}},
	}, {
		name:   "an ssmParameter",
		class:  class(awsv1.AMISelectorTerm{SSMParameter: "/team/base/ami"}),
		params: map[string]string{"/team/base/ami": "ami-0teamarm"},
		want:   []awsv1.AMI{{ID: "ami-0teamarm", Name: "team-base-arm-2024", Requirements: reqs("arm64")}},
	}, {
		name:  "terms are ORed; a term that matches nothing is no error while another matches",
		class: class(awsv1.AMISelectorTerm{ID: "ami-0nothere"}, awsv1.AMISelectorTerm{ID: "ami-0team2024"}),
		want:  []awsv1.AMI{{ID: "ami-0team2024", Name: "team-base-2024", Requirements: reqs("amd64")}},
	}, {
		name: "when nothing matches, every term is named",
		class: class(
			awsv1.AMISelectorTerm{ID: "ami-0nothere"},
			awsv1.AMISelectorTerm{Tags: map[string]string{"team": "b"}},
			awsv1.AMISelectorTerm{Name: "nope"},
			awsv1.AMISelectorTerm{SSMParameter: "/missing"},
		),
		wantErr: `AMISelector did not match any AMIs: amiSelectorTerms[0] (id "ami-0nothere"): DescribeImages finds no available image; amiSelectorTerms[1] (tag team=b): DescribeImages finds no available image; amiSelectorTerms[2] (owner "self,amazon" (the default with a name), name "nope"): DescribeImages finds no available image; amiSelectorTerms[3] (ssmParameter "/missing"): the SSM parameter does not exist`,
	}}
	motoEC2 := mototest.Clients(t, "").EC2
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k8s := tc.k8s
			if k8s == "" {
				k8s = "1.31"
			}
			r := &Resolver{SSM: &fakeSSM{params: tc.params}, EC2: motoEC2}
			got, err := r.Resolve(context.Background(), tc.class, k8s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing\n%s\ngot\n%v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
		})
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// recordingEC2 answers DescribeImages with fixed images and keeps the
// requests, for what moto does not model (deprecation) or cannot show
// (which owners were asked for).
type recordingEC2 struct {
	images   []ec2types.Image
	requests []*ec2.DescribeImagesInput
}

func (f *recordingEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	f.requests = append(f.requests, in)
	return &ec2.DescribeImagesOutput{Images: f.images}, nil
}

func image(id, arch, created, deprecation string) ec2types.Image {
	img := ec2types.Image{ImageId: aws.String(id), Name: aws.String(id), Architecture: ec2types.ArchitectureValues(arch), CreationDate: aws.String(created)}
	if deprecation != "" {
		img.DeprecationTime = aws.String(deprecation)
	}
	return img
}

func TestResolveDeprecated(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		images []ec2types.Image
		want   []awsv1.AMI
	}{{
		name: "an older current image beats a newer deprecated one",
		images: []ec2types.Image{
			image("ami-new-deprecated", "x86_64", "2025-05-01T00:00:00.000Z", "2025-05-15T00:00:00.000Z"),
			image("ami-old-current", "x86_64", "2024-01-01T00:00:00.000Z", ""),
		},
		want: []awsv1.AMI{{ID: "ami-old-current", Name: "ami-old-current", Requirements: reqs("amd64")}},
	}, {
		name: "a deprecated image is used, and marked, when nothing current serves its architecture",
		images: []ec2types.Image{
			image("ami-arm-deprecated", "arm64", "2025-01-01T00:00:00.000Z", "2025-02-01T00:00:00.000Z"),
			image("ami-arm-older-deprecated", "arm64", "2024-01-01T00:00:00.000Z", "2024-02-01T00:00:00.000Z"),
			image("ami-amd", "x86_64", "2024-01-01T00:00:00.000Z", ""),
		},
		want: []awsv1.AMI{
			{ID: "ami-arm-deprecated", Name: "ami-arm-deprecated", Deprecated: true, Requirements: reqs("arm64")},
			{ID: "ami-amd", Name: "ami-amd", Requirements: reqs("amd64")},
		},
	}, {
		name: "a deprecation time still to come is not deprecated",
		images: []ec2types.Image{
			image("ami-later", "x86_64", "2025-05-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z"),
			image("ami-older", "x86_64", "2024-01-01T00:00:00.000Z", ""),
		},
		want: []awsv1.AMI{{ID: "ami-later", Name: "ami-later", Requirements: reqs("amd64")}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ec2api := &recordingEC2{images: tc.images}
			r := &Resolver{SSM: &fakeSSM{}, EC2: ec2api, Clock: clocktesting.NewFakePassiveClock(now)}
			got, err := r.Resolve(context.Background(), class(awsv1.AMISelectorTerm{Tags: map[string]string{"team": "a"}}), "1.31")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
			in := ec2api.requests[0]
			if !aws.ToBool(in.IncludeDeprecated) {
				t.Error("DescribeImages must include deprecated images, or a class pinned to one stops launching")
			}
		})
	}
}

func TestResolveRequests(t *testing.T) {
	ec2api := &recordingEC2{images: []ec2types.Image{image("ami-1", "x86_64", "2024-01-01T00:00:00.000Z", "")}}
	r := &Resolver{SSM: &fakeSSM{}, EC2: ec2api}
	if _, err := r.Resolve(context.Background(), class(awsv1.AMISelectorTerm{Name: "base"}, awsv1.AMISelectorTerm{Name: "base", Owner: "aws-marketplace"}), "1.31"); err != nil {
		t.Fatal(err)
	}
	if got := ec2api.requests[0].Owners; !reflect.DeepEqual(got, []string{"self", "amazon"}) {
		t.Errorf("a name without an owner must be limited to self and amazon, or any account's public image of that name is taken; owners %v", got)
	}
	if got := ec2api.requests[1].Owners; !reflect.DeepEqual(got, []string{"aws-marketplace"}) {
		t.Errorf("owners %v", got)
	}
	var state bool
	for _, f := range ec2api.requests[0].Filters {
		state = state || (aws.ToString(f.Name) == "state" && reflect.DeepEqual(f.Values, []string{"available"}))
	}
	if !state {
		t.Errorf("images that are not available cannot launch; filters %v", ec2api.requests[0].Filters)
	}
}

func TestResolveErrors(t *testing.T) {
	denied := errors.New("AccessDeniedException: not authorized to perform ssm:GetParameter")
	r := &Resolver{SSM: &fakeSSM{err: denied}, EC2: &recordingEC2{}}
	_, err := r.Resolve(context.Background(), class(awsv1.AMISelectorTerm{Alias: "al2023@latest"}), "1.31")
	if !errors.Is(err, denied) || !strings.Contains(err.Error(), `amiSelectorTerms[0] (alias "al2023@latest")`) {
		t.Errorf("an SSM failure other than a missing parameter must surface with its term; got %v", err)
	}
	_, err = r.Resolve(context.Background(), class(awsv1.AMISelectorTerm{Alias: "al2023@latest"}), "")
	if err == nil || !strings.Contains(err.Error(), "Kubernetes version is unknown") {
		t.Errorf("got %v", err)
	}
	_, err = (&Resolver{SSM: &fakeSSM{}, EC2: &recordingEC2{}}).Resolve(context.Background(), class(awsv1.AMISelectorTerm{ID: "ami-1"}), "1.31")
	if !errors.Is(err, ErrNoAMIs) {
		t.Errorf("want ErrNoAMIs, got %v", err)
	}
	// Terms that match nothing are the user's to fix: the controller
	// reads the condition reason from the error, and the message names
	// the term and the fix.
	var reasoned interface{ Reason() string }
	if !errors.As(err, &reasoned) || reasoned.Reason() != "AMINotFound" {
		t.Errorf("want a condition reason AMINotFound, got %v", err)
	}
	for _, want := range []string{"AMISelector did not match any AMIs", `amiSelectorTerms[0] (id "ami-1")`, "or fix the terms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not say %q", err, want)
		}
	}
}

func TestAliasParameters(t *testing.T) {
	cases := []struct {
		alias string
		want  []string
	}{
		{"al2023@latest", []string{
			eks + "/amazon-linux-2023/x86_64/standard/recommended/image_id",
			eks + "/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
			eks + "/amazon-linux-2023/x86_64/neuron/recommended/image_id",
			eks + "/amazon-linux-2023/arm64/standard/recommended/image_id",
			eks + "/amazon-linux-2023/arm64/nvidia/recommended/image_id",
		}},
		{"al2023@v20250101", []string{
			eks + "/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20250101/image_id",
			eks + "/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.31-v20250101/image_id",
			eks + "/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.31-v20250101/image_id",
			eks + "/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.31-v20250101/image_id",
			eks + "/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.31-v20250101/image_id",
		}},
		{"al2@latest", []string{
			eks + "/amazon-linux-2/recommended/image_id",
			eks + "/amazon-linux-2-arm64/recommended/image_id",
			eks + "/amazon-linux-2-gpu/recommended/image_id",
		}},
		{"al2@v20250101", []string{
			eks + "/amazon-linux-2/amazon-eks-node-1.31-v20250101/image_id",
			eks + "/amazon-linux-2-arm64/amazon-eks-arm64-node-1.31-v20250101/image_id",
			eks + "/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20250101/image_id",
		}},
		{"bottlerocket@latest", []string{
			"/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/latest/image_id",
		}},
		{"windows2019@latest", []string{"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.31/image_id"}},
		{"windows2025@latest", []string{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.31/image_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.alias, func(t *testing.T) {
			a, err := ParseAlias(tc.alias)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AliasParameters(a, "1.31")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseAlias(t *testing.T) {
	cases := []struct {
		in      string
		want    Alias
		wantErr string
	}{
		{"al2023@latest", Alias{awsv1.AMIFamilyAL2023, "latest"}, ""},
		{"Bottlerocket@v1.30.0", Alias{awsv1.AMIFamilyBottlerocket, "v1.30.0"}, ""},
		{"windows2022@latest", Alias{awsv1.AMIFamilyWindows2022, "latest"}, ""},
		{"windows2022@v1", Alias{}, "windows families may only specify version 'latest'"},
		{"ubuntu@latest", Alias{}, "family is not supported"},
		{"al2023", Alias{}, "must match the format 'family@version'"},
		{"al2023@", Alias{}, "must match the format 'family@version'"},
	}
	for _, tc := range cases {
		got, err := ParseAlias(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: want error %q, got %v", tc.in, tc.wantErr, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v", tc.in, got, err)
		}
	}
}

func TestFamily(t *testing.T) {
	custom := awsv1.AMIFamilyCustom
	al2 := awsv1.AMIFamilyAL2
	cases := []struct {
		class *awsv1.EC2NodeClass
		want  string
	}{
		{class(awsv1.AMISelectorTerm{Alias: "al2023@latest"}), awsv1.AMIFamilyAL2023},
		{class(awsv1.AMISelectorTerm{Alias: "bottlerocket@latest"}), awsv1.AMIFamilyBottlerocket},
		{class(awsv1.AMISelectorTerm{Alias: "windows2019@latest"}), awsv1.AMIFamilyWindows2019},
		{&awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: &custom, AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}}}, awsv1.AMIFamilyCustom},
		{&awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: &al2, AMISelectorTerms: []awsv1.AMISelectorTerm{{ID: "ami-1"}}}}, awsv1.AMIFamilyAL2},
	}
	for _, tc := range cases {
		if got := Family(tc.class); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.class.Spec, got, tc.want)
		}
	}
}

func TestDefaultBlockDeviceMappings(t *testing.T) {
	cases := map[string][]string{
		awsv1.AMIFamilyAL2023:       {"/dev/xvda=20Gi"},
		awsv1.AMIFamilyAL2:          {"/dev/xvda=20Gi"},
		awsv1.AMIFamilyBottlerocket: {"/dev/xvda=4Gi", "/dev/xvdb=20Gi"},
		awsv1.AMIFamilyWindows2022:  {"/dev/sda1=50Gi"},
		awsv1.AMIFamilyCustom:       nil,
	}
	for family, want := range cases {
		var got []string
		for _, m := range DefaultBlockDeviceMappings(family) {
			if aws.ToString(m.EBS.VolumeType) != "gp3" || !aws.ToBool(m.EBS.Encrypted) {
				t.Errorf("%s: %s is not an encrypted gp3 volume", family, aws.ToString(m.DeviceName))
			}
			got = append(got, aws.ToString(m.DeviceName)+"="+m.EBS.VolumeSize.String())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", family, got, want)
		}
	}
}

// ssmRecorder answers GetParameter and records the names asked. It has no
// GetParameters: the published controller policies grant ssm:GetParameter
// alone, on arn:aws:ssm:<region>::parameter/aws/service/*.
type ssmRecorder struct {
	mu     sync.Mutex
	values map[string]string
	asked  []string
}

func (r *ssmRecorder) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := aws.ToString(in.Name)
	r.asked = append(r.asked, name)
	v, ok := r.values[name]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: aws.String(v)}}, nil
}

// TestAliasReadsFitThePublishedPolicy: every alias is read one
// ssm:GetParameter per name, each name under /aws/service/ (the only
// parameters the published policies let the controller read), and a
// variant SSM does not publish is skipped, not failed.
func TestAliasReadsFitThePublishedPolicy(t *testing.T) {
	for _, alias := range []string{"al2023@latest", "al2@latest", "bottlerocket@latest", "windows2022@latest", "al2023@v20250101"} {
		t.Run(alias, func(t *testing.T) {
			a, err := ParseAlias(alias)
			if err != nil {
				t.Fatal(err)
			}
			names, err := AliasParameters(a, "1.31")
			if err != nil {
				t.Fatal(err)
			}
			rec := &ssmRecorder{values: map[string]string{names[0]: "ami-0123456789abcdef0"}}
			got, err := ReadParameters(context.Background(), rec, names)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[names[0]] != "ami-0123456789abcdef0" {
				t.Errorf("read %v, want the one published parameter", got)
			}
			sort.Strings(rec.asked)
			want := slices.Clone(names)
			sort.Strings(want)
			if !reflect.DeepEqual(rec.asked, want) {
				t.Errorf("GetParameter for %v, want one call per name %v", rec.asked, want)
			}
			for _, n := range rec.asked {
				if !strings.HasPrefix(n, "/aws/service/") {
					t.Errorf("parameter %s is outside /aws/service/, which the controller policy does not grant", n)
				}
			}
		})
	}
}
