package viewer

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/pricing"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/kwok"
	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Bad flag values are refused with the flag's name and a value that works.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func() error
		want  []string
	}{
		{"sort order", func() error { _, err := ParseSort("creation=down"); return err }, []string{"--node-sort", "creation=dsc"}},
		{"sort key", func() error { _, err := ParseSort("=asc"); return err }, []string{"--node-sort", "creation=dsc"}},
		{"sort bad label", func() error { _, err := ParseSort("not a label=asc"); return err }, []string{"--node-sort", "karpenter.sh/nodepool=asc"}},
		{"style count", func() error { _, err := ParseStyle("#fff,#000", colorprofile.TrueColor); return err }, []string{"--style", DefaultStyle, "found 2"}},
		{"style colour", func() error { _, err := ParseStyle("green,#ff0,#f00", colorprofile.TrueColor); return err }, []string{"--style", `"green" is not a colour`, "#04B575"}},
		{"style ansi range", func() error { _, err := ParseStyle("2,3,300", colorprofile.TrueColor); return err }, []string{"--style", "0-255"}},
		{"resources empty", func() error { _, err := ParseResources(" , "); return err }, []string{"--resources", "cpu,memory"}},
		{"resources name", func() error { _, err := ParseResources("cpu,me mory"); return err }, []string{"--resources", `"me mory"`}},
		{"selector", func() error { _, err := ParseSelector("a=(b"); return err }, []string{"--node-selector", "karpenter.sh/nodepool=default"}},
		{"extra labels", func() error { _, err := ParseExtraLabels("zone,bad key"); return err }, []string{"--extra-labels", `"bad key"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	for _, ok := range []string{"creation", "creation=dsc", "karpenter.sh/nodepool=asc", ComputedLabelNodeAge + "=dsc"} {
		if _, err := ParseSort(ok); err != nil {
			t.Errorf("ParseSort(%q): %v", ok, err)
		}
	}
	if _, err := ParseStyle("#04B575,#FF0,214", colorprofile.TrueColor); err != nil {
		t.Errorf("ParseStyle of hex, short hex and ANSI: %v", err)
	}
}

// A kwok node costs what the kwok cloud provider offered it at, in every
// zone and capacity type; an aws node what the AWS pricing provider says.
func TestPricesAreTheProviders(t *testing.T) {
	const region = "us-west-2"
	zones := []string{"us-west-2a", "us-west-2b"}
	provider, err := kwok.New(fake.NewClientBuilder().Build(), kwok.Options{Region: region, Zones: zones})
	if err != nil {
		t.Fatal(err)
	}
	its, err := provider.InstanceTypes(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	prices := &Prices{}
	checked := 0
	for _, it := range its[:40] {
		for _, o := range it.Offerings {
			got, ok := prices.Price(Machine{Cloud: CloudOf(kwok.ProviderID(region, o.Zone, "n")), Region: region, Zone: o.Zone, InstanceType: it.Name, CapacityType: o.CapacityType})
			if !ok || got != o.Price {
				t.Fatalf("%s %s %s: viewer $%v (%v), kwok provider $%v", it.Name, o.Zone, o.CapacityType, got, ok, o.Price)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no offerings checked")
	}
	if CloudOf("aws:///us-east-1a/i-0abc") != CloudAWS || CloudOf("") != "" || CloudOf("gce://p/z/n") != "" {
		t.Error("CloudOf misreads provider IDs")
	}
}

// An aws node is priced by the AWS provider the viewer was given, and its
// note reaches the footer; kwok nodes stay on the catalog.
func TestAWSNodesUseTheAWSPrices(t *testing.T) {
	calls := 0
	// A provider of another region's catalog prices tells its answers
	// apart from the kwok nodes' us-east-1 catalog.
	other := pricing.New(pricing.Options{Region: "sa-east-1", Isolated: true})
	want, _ := other.OnDemand("c6a.large")
	prices := &Prices{AWS: func(string) (*pricing.Provider, string) {
		calls++
		return other, "aws nodes: embedded catalog, no AWS credentials"
	}}
	in := mixedCluster()
	in.Nodes = append(in.Nodes, kwokNode(nodeSpec{name: "i-aws", itype: "c6a.large", ct: "on-demand", zone: "us-east-1a", pool: "default", ready: true, aws: true}))
	s := Build(in, Options{}, prices, nil)
	if calls == 0 {
		t.Fatal("the AWS prices were never asked")
	}
	if !strings.Contains(strings.Join(s.PriceNotes, ";"), "no AWS credentials") {
		t.Errorf("notes %q lack the AWS note", s.PriceNotes)
	}
	for _, n := range s.Nodes {
		if n.Name == "i-aws" && (n.Cloud != CloudAWS || !n.Priced || n.Price != want || want == 0.0765) {
			t.Errorf("aws node priced $%v (%v, cloud %q), want the AWS provider's $%v", n.Price, n.Priced, n.Cloud, want)
		}
		if n.Name == "ip-10-0-1-1" && n.Price != 0.306 {
			t.Errorf("kwok node priced $%v, want the catalog's $0.306", n.Price)
		}
	}
}

// Requests are summed the way kube-scheduler counts them (init containers
// and overhead included), DaemonSet pods count on their node, finished pods
// do not; pending pods get Joiner's latest event, not kube-scheduler's.
func TestBuildCounts(t *testing.T) {
	in := mixedCluster()
	done := pod("default", "done-1", "ip-10-0-1-1", "4", "1Gi")
	done.Status.Phase = corev1.PodSucceeded
	withOverhead := pod("default", "vm-1", "ip-10-0-1-2", "100m", "64Mi")
	withOverhead.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	in.Pods = append(in.Pods, done, withOverhead)
	s := Build(in, Options{}, &Prices{}, nil)
	got := map[string]string{}
	for _, n := range s.Nodes {
		q := n.Requests[corev1.ResourceCPU]
		got[n.Name] = q.String()
	}
	// web-1 3 + web-2 max(1, init 2.5) + agent 0.1; batch 1.5 + agent 0.1 + vm 0.1+0.25.
	if got["ip-10-0-1-1"] != "5600m" || got["ip-10-0-1-2"] != "1950m" {
		t.Errorf("cpu requests %v", got)
	}
	reasons := map[string]string{}
	for _, p := range s.Pending {
		reasons[p.Name] = p.Reason
	}
	if !strings.HasPrefix(reasons["default/huge-1"], "Failed to schedule pod, no instance type") || !strings.HasPrefix(reasons["default/web-3"], "Pod should schedule on") {
		t.Errorf("pending reasons %v", reasons)
	}
}

// The disruption line says what Joiner's conditions and events say.
func TestDisruptionStatus(t *testing.T) {
	n := kwokNode(nodeSpec{name: "n1", itype: "c6a.large", ct: "on-demand", zone: "us-east-1a", pool: "default", age: 719 * time.Hour, ready: true})
	nc := claimFor(n,
		metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodeClassDrift"},
		metav1.Condition{Type: v1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue})
	events := latestBlocked([]corev1.Event{
		event("Node", "", "n1", ReasonDisruptionBlocked, "older", 10*time.Minute),
		event("NodeClaim", "", "n1", ReasonDisruptionBlocked, "newest: budget exhausted", time.Minute),
		event("Node", "", "n1", ReasonFailedScheduling, "not a block", 0),
		{InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}, Reason: ReasonDisruptionBlocked, Message: "another controller's",
			Source: corev1.EventSource{Component: "other"}, LastTimestamp: ago(0)},
	})
	got := strings.Join(disruptionStatus(&nc, now, events, "n1"), " · ")
	want := "drifted (NodeClassDrift) · consolidatable · expires in 60m · blocked: newest: budget exhausted"
	if got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	nc.CreationTimestamp = ago(721 * time.Hour)
	nc.Spec.ExpireAfter = v1.MustParseNillableDuration("720h")
	if got := disruptionStatus(&nc, now, nil, "n1"); got[len(got)-1] != "expired" {
		t.Errorf("past expireAfter: %q", got)
	}
}

// Keys toggle the views, page within bounds and quit.
func TestModelKeys(t *testing.T) {
	in := mixedCluster()
	snap := Build(in, Options{}, &Prices{}, nil)
	var m tea.Model = NewModel(PlainStyle(), "waiting")
	if !strings.Contains(m.View().Content, "waiting") {
		t.Fatalf("before a snapshot: %q", m.View().Content)
	}
	m, _ = m.Update(tea.WindowSizeMsg{Width: 160, Height: 11})
	m, _ = m.Update(SnapshotMsg(snap))
	press := func(k string) tea.Cmd {
		msg := tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		if k == "right" {
			msg = tea.KeyPressMsg{Code: tea.KeyRight}
		}
		var cmd tea.Cmd
		m, cmd = m.Update(msg)
		return cmd
	}
	for range 5 {
		press("right")
	}
	if got := m.View().Content; !strings.Contains(got, "page 3/3") {
		t.Errorf("after 5 × →, want the last page 3/3:\n%s", got)
	}
	m, _ = m.Update(tea.KeyPressMsg{Code: tea.KeyLeft})
	if got := m.View().Content; !strings.Contains(got, "page 2/3") {
		t.Errorf("← from the last page, want page 2/3:\n%s", got)
	}
	press("p")
	if got := m.View().Content; !strings.Contains(got, "PENDING POD") {
		t.Errorf("p shows no pending pods:\n%s", got)
	}
	press("p")
	press("d")
	if got := m.View().Content; !strings.Contains(got, "└ ") {
		t.Errorf("d shows no disruption lines:\n%s", got)
	}
	if cmd := press("q"); cmd == nil {
		t.Error("q does not quit")
	}
}

// The bound's cache computes again when the pods change or a minute
// passes, not otherwise.
func TestMemoBound(t *testing.T) {
	in := mixedCluster()
	calls := 0
	clk := clocktesting.NewFakePassiveClock(now)
	b := memoBound(clk, func(s scheduling.Snapshot) (float64, error) { calls++; return scheduling.LowerBound(s) })
	Build(in, Options{}, &Prices{}, b)
	first := calls
	s1 := Build(in, Options{}, &Prices{}, b)
	in.Pods = append(in.Pods, pod("default", "web-9", "ip-10-0-1-1", "1", "1Gi"))
	s2 := Build(in, Options{}, &Prices{}, b)
	clk.SetTime(now.Add(time.Minute))
	Build(in, Options{}, &Prices{}, b)
	if first != 1 || calls != 3 || s1.Bound == 0 || s2.Bound <= s1.Bound {
		t.Errorf("calls %d then %d, bounds %v then %v", first, calls, s1.Bound, s2.Bound)
	}
}

// Percentages take --style's colours at eks-node-viewer's thresholds.
func TestPercentThresholds(t *testing.T) {
	st, err := ParseStyle("#00ff00,#ffff00,#ff0000", colorprofile.TrueColor)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pct  float64
		want string
	}{{0, "38;2;0;255;0"}, {60, "38;2;0;255;0"}, {60.1, "38;2;255;255;0"}, {90, "38;2;255;255;0"}, {90.1, "38;2;255;0;0"}} {
		if got := st.Percent(tc.pct); !strings.Contains(got, tc.want) {
			t.Errorf("%v%%: %q lacks %q", tc.pct, got, tc.want)
		}
	}
}

// Without AWS credentials aws nodes are priced from the catalog and the
// footer says why; with them, the controller's provider is used, on the
// catalog until its first refresh succeeds.
func TestAWSPricesFallBack(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, note := NewAWSPrices(ctx, clocktesting.NewFakeClock(now))("us-east-1")
	if !strings.Contains(note, "embedded catalog") || !strings.Contains(note, "no AWS credentials") || !strings.Contains(note, "--disable-pricing") {
		t.Errorf("note without credentials: %q", note)
	}
	if price, ok := p.OnDemand("c6a.large"); !ok || price != 0.0765 {
		t.Errorf("catalog price $%v %v", price, ok)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	_, note = NewAWSPrices(ctx, clocktesting.NewFakeClock(now))("us-east-1")
	if !strings.Contains(note, "aws nodes (us-east-1): on-demand from the embedded catalog") {
		t.Errorf("note with credentials, before a refresh: %q", note)
	}
}
