package instance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/batcher"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/tags"
)

// UnsettledTTL is how long a fleet call whose outcome is unknown is asked
// again, with its own client token, instead of a new one, and how long
// garbage collection leaves its instances to the NodeClaims that will
// claim them. A NodeClaim retries its launch within seconds; one that has
// not come back by then may be gone (deleted, or past its launch timeout),
// and an instance launched for it would run unclaimed for as long as it
// was spared. Past the window the call is forgotten: garbage collection
// ends what it launched, and a late retry launches anew.
const UnsettledTTL = 5 * time.Minute

// unsettled is a fleet call that failed without saying whether EC2 acted:
// a 5xx can come after the fleet launched, a connection can drop with
// the answer in it, and the SDK's retries of one call share its client
// token, so any of them may have been the one that ran. A new batch of the
// same NodeClaims would carry another token and launch a second time;
// asking again with this call's input either returns what it launched or
// launches it now, once.
type unsettled struct {
	mu   sync.Mutex
	in   *ec2.CreateFleetInput
	reqs []Request
	at   time.Time
	// results, once EC2 answered the call again, per request.
	results []batcher.Result[[]*Instance]
}

// outcomeUnknown reports whether a failed call may have run. Only a
// client error that Joiner's retry policy (awsclient) does not retry
// proves it did not: EC2 refuses such a request before acting, and it
// ends the call at its first answer, so no earlier attempt ran either. An
// error the policy retries (throttling, a timeout, a 5xx) says nothing of
// the attempts before it.
func outcomeUnknown(err error) bool {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		return true // no answer: the request may have arrived
	}
	if status := re.HTTPStatusCode(); status < 400 || status >= 500 {
		return true
	}
	return awsclient.NewRetryer().IsErrorRetryable(err)
}

func (p *Provider) rememberUnsettled(in *ec2.CreateFleetInput, reqs []Request) {
	u := &unsettled{in: in, reqs: reqs, at: p.clock.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range reqs {
		p.unsettled[r.Token] = u
	}
}

// unsettledFor returns the unknown-outcome call the request was part of,
// dropping calls older than UnsettledTTL on the way.
func (p *Provider) unsettledFor(token string) *unsettled {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, u := range p.unsettled {
		if p.expired(u) {
			delete(p.unsettled, t)
		}
	}
	return p.unsettled[token]
}

// settle asks EC2 the unsettled call again, once for all its requests,
// and returns the request's share of the answer. Another unknown outcome
// keeps the call for the next retry; any answer settles it.
func (p *Provider) settle(ctx context.Context, u *unsettled, token string) (*Instance, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.results == nil {
		resp, err := p.ec2.CreateFleet(ctx, u.in)
		if err != nil {
			if !outcomeUnknown(err) {
				p.forgetUnsettled(u)
			}
			return nil, fmt.Errorf("creating fleet again with client token %s: %w", aws.ToString(u.in.ClientToken), err)
		}
		u.results = p.fleetResults(u.reqs, resp)
	}
	p.mu.Lock()
	delete(p.unsettled, token)
	p.mu.Unlock()
	for i, r := range u.reqs {
		if r.Token == token {
			if u.results[i].Err != nil {
				return nil, u.results[i].Err
			}
			return u.results[i].Value[0], nil
		}
	}
	return nil, fmt.Errorf("request %s is not part of fleet call %s", token, aws.ToString(u.in.ClientToken))
}

// settling reports whether the instance was launched by a fleet call
// that is still under way or whose outcome is still unknown: one of that
// call's NodeClaims will claim it, so it is not the cluster's to collect
// yet, nor any other NodeClaim's to adopt.
func (p *Provider) settling(inst *Instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settlingLocked(inst)
}

// settlingLocked is settling with p.mu held.
func (p *Provider) settlingLocked(inst *Instance) bool {
	token := inst.Tags[tags.LaunchToken]
	if token == "" {
		return false
	}
	if p.calling[token] {
		return true
	}
	for _, u := range p.unsettled {
		if aws.ToString(u.in.ClientToken) == token && !p.expired(u) {
			return true
		}
	}
	return false
}

// expired reports whether the call is past UnsettledTTL, and so forgotten.
func (p *Provider) expired(u *unsettled) bool { return p.clock.Since(u.at) > UnsettledTTL }

func (p *Provider) forgetUnsettled(u *unsettled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, v := range p.unsettled {
		if v == u {
			delete(p.unsettled, t)
		}
	}
}
