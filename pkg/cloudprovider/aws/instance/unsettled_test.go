package instance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
	clocktesting "k8s.io/utils/clock/testing"
)

// tokenFleet is EC2's CreateFleet as far as idempotency goes: a client
// token launches once, and its call asked again answers the same
// instances. Each call takes the next step of its script: "lost" launches
// and answers a 500, "throttle" and "refused" launch nothing and answer
// RequestLimitExceeded or a 400.
type tokenFleet struct {
	EC2API
	mu       sync.Mutex
	script   []string
	tokens   []string // per call
	byToken  map[string][]string
	tags     map[string][]ec2types.Tag // the instances' tags, by token
	launched int
}

// DescribeInstances lists every instance launched, with its fleet's tags.
func (f *tokenFleet) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var r ec2types.Reservation
	for token, ids := range f.byToken {
		for _, id := range ids {
			r.Instances = append(r.Instances, ec2types.Instance{InstanceId: aws.String(id), Tags: f.tags[token],
				State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning}})
		}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
}

func (f *tokenFleet) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return f.fleet(in)
}

func apiError(status int, code string) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: code},
	}}
}

func (f *tokenFleet) fleet(in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	step := ""
	if len(f.tokens) < len(f.script) {
		step = f.script[len(f.tokens)]
	}
	token := aws.ToString(in.ClientToken)
	f.tokens = append(f.tokens, token)
	switch step {
	case "throttle":
		return nil, apiError(http.StatusServiceUnavailable, "RequestLimitExceeded")
	case "refused":
		return nil, apiError(http.StatusBadRequest, "InvalidParameterValue")
	}
	if f.byToken[token] == nil {
		for _, spec := range in.TagSpecifications {
			if spec.ResourceType == ec2types.ResourceTypeInstance {
				f.tags[token] = spec.Tags
			}
		}
		for range aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) {
			f.launched++
			f.byToken[token] = append(f.byToken[token], fmt.Sprintf("i-%d", f.launched))
		}
	}
	if step == "lost" {
		return nil, apiError(http.StatusInternalServerError, "InternalError")
	}
	return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{InstanceIds: f.byToken[token], InstanceType: "m5.large",
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{SubnetId: aws.String("s"), AvailabilityZone: aws.String("z")}}}}}, nil
}

// TestUnknownOutcomeIsAskedAgainWithItsToken: two NodeClaims launched in
// one fleet call that failed retry one at a time. When the failure leaves
// open whether EC2 launched, each retry must ask that call again with its
// client token, so EC2 launches the pair once whatever happened; a refusal
// proves nothing launched, and the retries batch anew.
func TestUnknownOutcomeIsAskedAgainWithItsToken(t *testing.T) {
	cases := []struct {
		name string
		// script is the fleet calls' steps: the batch's, then the retries'.
		script []string
		// wantCalls is the fleet calls made; wantSameToken whether every
		// one carried the first call's token.
		wantCalls     int
		wantSameToken bool
	}{
		{"answer lost: asked again once for both", []string{"lost"}, 2, true},
		{"answer lost twice: asked again until answered", []string{"lost", "lost"}, 3, true},
		{"throttled after the SDK's retries: asked again", []string{"throttle"}, 2, true},
		{"refused: nothing launched, each retry a new batch", []string{"refused"}, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &tokenFleet{script: tc.script, byToken: map[string][]string{}, tags: map[string][]ec2types.Tag{}}
			p := New(Options{EC2: f, ClusterName: "demo"})
			listed := func() int {
				insts, err := p.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return len(insts)
			}
			req := func(token string) Request {
				return Request{CapacityType: CapacityTypeOnDemand, Token: token, Overrides: []Override{{LaunchTemplate: "lt", InstanceType: "m5.large", SubnetID: "s", Zone: "z", Price: 1}}}
			}
			var wg sync.WaitGroup
			for _, token := range []string{"a", "b"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := p.Create(context.Background(), req(token)); err == nil {
						t.Errorf("launch %s: the batch's call failed, want an error", token)
					}
				}()
			}
			wg.Wait()
			if len(f.tokens) != 1 {
				t.Fatalf("%d fleet calls for two concurrent launches, want 1", len(f.tokens))
			}
			// What a call of unknown outcome launched waits for its
			// NodeClaims, not for garbage collection.
			if n := listed(); n != 0 {
				t.Errorf("List shows %d of the %d instances the failed call launched, want none until the retries claim them", n, f.launched)
			}
			// Each NodeClaim retries until it has its instance, as the
			// lifecycle controller does, one at a time.
			ids := map[string]bool{}
			for _, token := range []string{"a", "b"} {
				for try := 0; try < 3; try++ {
					if inst, err := p.Create(context.Background(), req(token)); err == nil {
						ids[inst.ID] = true
						break
					}
				}
			}
			if len(ids) != 2 {
				t.Errorf("the retries got instances %v, want two distinct", ids)
			}
			if n := listed(); n != 2 {
				t.Errorf("List shows %d instances once the retries claimed them, want 2", n)
			}
			if f.launched != 2 {
				t.Errorf("EC2 launched %d instances for two NodeClaims", f.launched)
			}
			if len(f.tokens) != tc.wantCalls {
				t.Errorf("%d fleet calls %v, want %d", len(f.tokens), f.tokens, tc.wantCalls)
			}
			same := true
			for _, tok := range f.tokens {
				same = same && tok == f.tokens[0]
			}
			if same != tc.wantSameToken {
				t.Errorf("client tokens %v: all the first call's is %v, want %v", f.tokens, same, tc.wantSameToken)
			}
		})
	}
}

// TestOutcomeUnknown: only a refusal proves a fleet call did not run.
func TestOutcomeUnknown(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no answer at all", errors.New("dial tcp: connection reset by peer"), true},
		{"a server error", apiError(http.StatusInternalServerError, "InternalError"), true},
		{"unavailable", apiError(http.StatusServiceUnavailable, "Unavailable"), true},
		{"throttled last, an earlier attempt may have run", apiError(http.StatusServiceUnavailable, "RequestLimitExceeded"), true},
		{"throttled with a 400", apiError(http.StatusBadRequest, "Throttling"), true},
		{"a refused parameter", apiError(http.StatusBadRequest, "InvalidParameterValue"), false},
		{"a refused permission", apiError(http.StatusForbidden, "UnauthorizedOperation"), false},
		{"wrapped by the caller", fmt.Errorf("creating fleet: %w", apiError(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeUnknown(tc.err); got != tc.want {
				t.Errorf("outcomeUnknown(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestUnsettledExpires: past UnsettledTTL a call of unknown outcome is
// neither asked again nor spared by garbage collection, so an instance
// whose NodeClaim never came back does not run unclaimed for longer.
func TestUnsettledExpires(t *testing.T) {
	cases := []struct {
		name        string
		age         time.Duration
		wantAsk     bool
		wantSparing bool
	}{
		{"just failed", 0, true, true},
		{"within the window", UnsettledTTL - time.Second, true, true},
		{"past the window", UnsettledTTL + time.Second, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			p := New(Options{EC2: &tokenFleet{}, ClusterName: "demo", Clock: clk})
			reqs := []Request{{Token: "a"}, {Token: "b"}}
			in := fleetInput(reqs)
			p.rememberUnsettled(in, reqs)
			clk.Step(tc.age)
			launched := &Instance{ID: "i-1", Tags: map[string]string{tags.LaunchToken: aws.ToString(in.ClientToken)}}
			if got := p.settling(launched); got != tc.wantSparing {
				t.Errorf("settling = %v, want %v", got, tc.wantSparing)
			}
			if got := p.unsettledFor("a") != nil; got != tc.wantAsk {
				t.Errorf("asked again = %v, want %v", got, tc.wantAsk)
			}
		})
	}
}

// TestFleetContext: spec.context goes in CreateFleet's Context field, and
// requests of different contexts never share a fleet call.
func TestFleetContext(t *testing.T) {
	o := Override{LaunchTemplate: "lt-1", InstanceType: "m5.large", SubnetID: "subnet-a", Zone: "us-east-1a"}
	with := Request{CapacityType: "on-demand", Overrides: []Override{o}, Token: "a", Context: "ctx-0123"}
	without := Request{CapacityType: "on-demand", Overrides: []Override{o}, Token: "b"}
	if got := aws.ToString(fleetInput([]Request{with}).Context); got != "ctx-0123" {
		t.Errorf("Context %q, want ctx-0123", got)
	}
	if fleetInput([]Request{without}).Context != nil {
		t.Error("a class without a context sent one")
	}
	if batchKey(with) == batchKey(without) {
		t.Error("requests of different contexts share a batch")
	}
}
