package nodeclass_test

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	"github.com/joiner-autoscaler/joiner/pkg/controllers/nodeclass"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// fakeParameters answers GetParameter from a map, as SSM does (a missing
// name is ParameterNotFound), and records the names read.
type fakeParameters struct {
	mu     sync.Mutex
	values map[string]string
	calls  []string
}

func (f *fakeParameters) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := aws.ToString(in.Name)
	f.calls = append(f.calls, name)
	v, ok := f.values[name]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{Message: aws.String(name)}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: aws.String(name), Value: aws.String(v)}}, nil
}

const (
	al2023x86 = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
	al2023arm = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"
	brX86     = "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"
)

func watchedClass(name, alias string, amis ...string) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if alias != "" {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}}
	} else {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0pinned"}}
	}
	for _, id := range amis {
		nc.Status.AMIs = append(nc.Status.AMIs, awsv1.AMI{ID: id})
	}
	return nc
}

func watchKube(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&awsv1.EC2NodeClass{}).Build()
}

// A class is re-resolved when a parameter its alias reads names an image
// its status lacks, once per new value.
func TestAMIWatchCheck(t *testing.T) {
	ctx := context.Background()
	ssmValues := map[string]string{al2023x86: "ami-x1", al2023arm: "ami-a1", brX86: "ami-b1"}
	params := &fakeParameters{values: ssmValues}
	kube := watchKube(t,
		watchedClass("current", "al2023@latest", "ami-x1", "ami-a1"),
		watchedClass("also-al2023", "al2023@latest", "ami-x1", "ami-a1"),
		watchedClass("bottlerocket", "bottlerocket@latest", "ami-b1"),
		watchedClass("pinned", "al2023@v20250620", "ami-old"),
		watchedClass("by-id", ""),
	)
	w := &nodeclass.AMIWatch{Client: kube, SSM: params, KubernetesVersion: func(context.Context) (string, error) { return "1.33", nil }}
	check := func(step string, want ...string) {
		t.Helper()
		got, err := w.Check(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Errorf("%s: re-resolve %v, want %v", step, got, want)
		}
	}

	check("every status lists its parameters' images")
	// Every class's names, each name once: the al2023 classes share
	// theirs, and pinned aliases and ids are not read.
	read := params.calls
	if len(read) != 9 || len(slices.Compact(slices.Sorted(slices.Values(read)))) != 9 { // al2023: 5 variants; bottlerocket: 4
		t.Errorf("read %v, want the 9 names of al2023@latest and bottlerocket@latest once each", read)
	}
	for _, n := range read {
		if strings.Contains(n, "v20250620") {
			t.Errorf("read %s, a pinned alias's parameter", n)
		}
	}

	ssmValues[al2023x86] = "ami-x2" // AWS releases an image
	check("a new al2023 image", "also-al2023", "current")
	check("the same value again: left to the resync")

	// The status catching up changes nothing; a further release does.
	current := &awsv1.EC2NodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "current"}, current); err != nil {
		t.Fatal(err)
	}
	current.Status.AMIs = []awsv1.AMI{{ID: "ami-x2"}, {ID: "ami-a1"}}
	if err := kube.Status().Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	check("the status caught up")
	ssmValues[al2023x86] = "ami-x3"
	check("another release", "also-al2023", "current")
	delete(ssmValues, al2023x86) // withdrawn: nothing to resolve to
	check("a parameter gone")
}

// A watch that starts after the release finds the classes whose status
// still lists the old image.
func TestAMIWatchFirstCheckFindsStaleClasses(t *testing.T) {
	params := &fakeParameters{values: map[string]string{al2023x86: "ami-x2", al2023arm: "ami-a1"}}
	w := &nodeclass.AMIWatch{Client: watchKube(t, watchedClass("stale", "al2023@latest", "ami-x1", "ami-a1")), SSM: params,
		KubernetesVersion: func(context.Context) (string, error) { return "1.33", nil }}
	got, err := w.Check(context.Background())
	if err != nil || !reflect.DeepEqual(got, []string{"stale"}) {
		t.Fatalf("Check = %v, %v; want [stale]", got, err)
	}
}

// Each parameter is read with ssm:GetParameter, the action Karpenter's
// published controller policy grants; the watch reads every family's names
// for the cluster's version, each once.
func TestAMIWatchReadsEachNameOnce(t *testing.T) {
	// al2023 reads 5 names, bottlerocket 4, al2 3 and windows 1: 13.
	kube := watchKube(t, watchedClass("al2023", "al2023@latest"), watchedClass("bottlerocket", "bottlerocket@latest"),
		watchedClass("al2", "al2@latest"), watchedClass("windows", "windows2022@latest"))
	params := &fakeParameters{}
	w := &nodeclass.AMIWatch{Client: kube, SSM: params, KubernetesVersion: func(context.Context) (string, error) { return "1.32", nil }}
	if _, err := w.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(params.calls) != 13 || len(slices.Compact(slices.Sorted(slices.Values(params.calls)))) != 13 {
		t.Errorf("read %v, want 13 names once each", params.calls)
	}
}
