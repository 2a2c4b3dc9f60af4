package nodeclass

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-autoscaler/joiner/api/aws/v1"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
)

type fakeCollector struct {
	keep map[string]bool
	err  error
}

func (f *fakeCollector) GarbageCollect(_ context.Context, keep map[string]bool) ([]string, error) {
	f.keep = keep
	return nil, f.err
}

// TestProfileGC: the profiles kept are the classes' current ones and those
// NodeClaims launched with; a refused listing is said once, and its end
// once.
func TestProfileGC(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	_ = awsv1.AddToScheme(scheme)
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.InstanceProfile = "demo_new"
	unset := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "unresolved"}}
	launchedBefore := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{awsv1.AnnotationInstanceProfile: "demo_old"}}}
	unannotated := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class, unset, launchedBefore, unannotated).Build()
	var logs bytes.Buffer
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{}))
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to perform: iam:ListInstanceProfiles"}
	f := &fakeCollector{}
	g := &ProfileGC{Client: kube, Profiles: f}
	for _, step := range []struct {
		err       error
		wantLines int // log lines about the permission so far
	}{
		{err: nil, wantLines: 0},
		{err: denied, wantLines: 1},
		{err: denied, wantLines: 1},
		{err: nil, wantLines: 2},
	} {
		f.err = step.err
		_ = g.Collect(ctx)
		if got := slices.Sorted(maps.Keys(f.keep)); !slices.Equal(got, []string{"demo_new", "demo_old"}) {
			t.Fatalf("kept %v, want the class's profile and the NodeClaim's", got)
		}
		if n := strings.Count(logs.String(), "iam:ListInstanceProfiles"); n != step.wantLines {
			t.Fatalf("%d log lines name the permission, want %d:\n%s", n, step.wantLines, logs.String())
		}
	}
}
