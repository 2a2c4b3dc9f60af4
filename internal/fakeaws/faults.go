package fakeaws

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Faults are the failures the endpoint injects, per call. The zero value
// injects nothing.
type Faults struct {
	// Seed makes the random draws of ThrottleRate and ErrorRate repeatable.
	Seed uint64 `json:"seed,omitempty"`
	// ThrottleRate is the share of calls answered with the service's
	// throttling error (EC2: RequestLimitExceeded, HTTP 503; query services:
	// Throttling; JSON services: ThrottlingException).
	ThrottleRate float64 `json:"throttleRate,omitempty"`
	// ErrorRate is the share of calls answered with a 5xx (EC2:
	// InternalError; others: InternalFailure), before they reach the
	// backend, so a failed call never changes state.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// LostRate is the share of calls the backend carries out whose answer
	// is then replaced with the same 5xx, as when EC2 acts and the answer
	// never arrives. The client cannot tell these from ErrorRate's, and
	// only a retry with the call's client token is safe from a second
	// launch (CreateFleet and RunInstances honour ClientToken here, as in
	// EC2).
	LostRate float64 `json:"lostRate,omitempty"`
	// Latency is added to every call.
	Latency Duration `json:"latency,omitempty"`
	// Actions override the rates and latency for one "service:Action"
	// (e.g. "ec2:CreateFleet"); path.Match patterns such as "ec2:Describe*"
	// work too. The first matching pattern in sorted order wins.
	Actions map[string]ActionFaults `json:"actions,omitempty"`
	// AccessDenied lists "service:Action" patterns answered as an IAM
	// policy without the permission would be (EC2: UnauthorizedOperation;
	// others: AccessDenied / AccessDeniedException).
	AccessDenied []string `json:"accessDenied,omitempty"`
	// InsufficientCapacity are the offerings CreateFleet reports
	// InsufficientInstanceCapacity for.
	InsufficientCapacity []Capacity `json:"insufficientCapacity,omitempty"`
	// DescribeDelay hides an instance from DescribeInstances for this long
	// after its launch, as EC2's eventual consistency does.
	DescribeDelay Duration `json:"describeDelay,omitempty"`
	// SpotRoleMissing plays an account without the spot service-linked
	// role (AWSServiceRoleForEC2Spot) whose caller may not create it: every
	// spot fleet fails each override with
	// AuthFailure.ServiceLinkedRoleCreationNotPermitted.
	SpotRoleMissing bool `json:"spotRoleMissing,omitempty"`
}

// ActionFaults override the general rates for one action.
type ActionFaults struct {
	ThrottleRate *float64  `json:"throttleRate,omitempty"`
	ErrorRate    *float64  `json:"errorRate,omitempty"`
	LostRate     *float64  `json:"lostRate,omitempty"`
	Latency      *Duration `json:"latency,omitempty"`
}

// Capacity names offerings out of capacity; an empty field matches any.
type Capacity struct {
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	// CapacityType is "on-demand" or "spot".
	CapacityType string `json:"capacityType,omitempty"`
}

func (c Capacity) matches(instanceType, zone, capacityType string) bool {
	return (c.InstanceType == "" || c.InstanceType == instanceType) &&
		(c.Zone == "" || c.Zone == zone) &&
		(c.CapacityType == "" || c.CapacityType == capacityType)
}

// ParseCapacity reads "type:zone:capacity-type", any part empty or "*".
func ParseCapacity(s string) (Capacity, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return Capacity{}, fmt.Errorf("insufficient capacity %q: want instance-type:zone:capacity-type (parts may be empty or *)", s)
	}
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	for i := range parts {
		if parts[i] == "*" {
			parts[i] = ""
		}
	}
	c := Capacity{InstanceType: parts[0], Zone: parts[1], CapacityType: parts[2]}
	if c.CapacityType != "" && c.CapacityType != "on-demand" && c.CapacityType != "spot" {
		return Capacity{}, fmt.Errorf("insufficient capacity %q: capacity type %q is not on-demand or spot", s, c.CapacityType)
	}
	return c, nil
}

// Duration is a time.Duration written as "1.5s" in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string ("250ms", "5s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Validate names the field and the fix.
func (f *Faults) Validate() error {
	rate := func(name string, r float64) error {
		if r < 0 || r > 1 {
			return fmt.Errorf("%s %v: must be between 0 and 1", name, r)
		}
		return nil
	}
	if err := rate("throttleRate", f.ThrottleRate); err != nil {
		return err
	}
	if err := rate("errorRate", f.ErrorRate); err != nil {
		return err
	}
	if err := rate("lostRate", f.LostRate); err != nil {
		return err
	}
	if sum := f.ThrottleRate + f.ErrorRate + f.LostRate; sum > 1 {
		return fmt.Errorf("throttleRate + errorRate + lostRate is %v: the shares of one call's draw must add up to at most 1", sum)
	}
	for k, a := range f.Actions {
		if !strings.Contains(k, ":") {
			return fmt.Errorf("actions: key %q must be service:Action, e.g. ec2:CreateFleet", k)
		}
		if a.ThrottleRate != nil {
			if err := rate("actions["+k+"].throttleRate", *a.ThrottleRate); err != nil {
				return err
			}
		}
		if a.ErrorRate != nil {
			if err := rate("actions["+k+"].errorRate", *a.ErrorRate); err != nil {
				return err
			}
		}
		if a.LostRate != nil {
			if err := rate("actions["+k+"].lostRate", *a.LostRate); err != nil {
				return err
			}
		}
	}
	for _, p := range f.AccessDenied {
		if _, err := path.Match(p, ""); err != nil || !strings.Contains(p, ":") {
			return fmt.Errorf("accessDenied: %q must be a service:Action pattern, e.g. ec2:CreateFleet or iam:*", p)
		}
	}
	for _, c := range f.InsufficientCapacity {
		if c.CapacityType != "" && c.CapacityType != "on-demand" && c.CapacityType != "spot" {
			return fmt.Errorf("insufficientCapacity: capacityType %q must be on-demand, spot or empty", c.CapacityType)
		}
	}
	return nil
}

// faultState holds the configured faults and the seeded random source.
type faultState struct {
	mu  sync.Mutex
	f   Faults
	rng *rand.Rand
}

func (s *faultState) set(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f = f
	s.rng = rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))
}

func (s *faultState) get() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f
}

// Fault kinds, as the call log names them.
const (
	faultThrottle     = "throttle"
	faultError        = "error"
	faultLost         = "lost"
	faultAccessDenied = "accessDenied"
	faultCapacity     = "insufficientCapacity"
	faultDescribe     = "describeDelay"
)

// decide draws the fault for one call: the latency to add and the error to
// answer with, if any.
func (s *faultState) decide(c *call) (time.Duration, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.f
	key := c.key()
	for _, p := range f.AccessDenied {
		if ok, _ := path.Match(p, key); ok {
			return f.Latency.Duration, faultAccessDenied
		}
	}
	throttle, errRate, lost, latency := f.ThrottleRate, f.ErrorRate, f.LostRate, f.Latency.Duration
	if a, ok := matchAction(f.Actions, key); ok {
		if a.ThrottleRate != nil {
			throttle = *a.ThrottleRate
		}
		if a.ErrorRate != nil {
			errRate = *a.ErrorRate
		}
		if a.LostRate != nil {
			lost = *a.LostRate
		}
		if a.Latency != nil {
			latency = a.Latency.Duration
		}
	}
	if throttle <= 0 && errRate <= 0 && lost <= 0 {
		return latency, ""
	}
	r := s.rng.Float64()
	switch {
	case r < throttle:
		return latency, faultThrottle
	case r < throttle+errRate:
		return latency, faultError
	case r < throttle+errRate+lost:
		return latency, faultLost
	}
	return latency, ""
}

func matchAction(actions map[string]ActionFaults, key string) (ActionFaults, bool) {
	if a, ok := actions[key]; ok {
		return a, true
	}
	best := ""
	for p := range actions {
		if ok, _ := path.Match(p, key); ok && (best == "" || p < best) {
			best = p
		}
	}
	if best == "" {
		return ActionFaults{}, false
	}
	return actions[best], true
}

// awsError is an error answer in the service's own format.
type awsError struct {
	Status  int
	Code    string
	Message string
	// Sender is false for server-side (5xx) errors, as query protocols
	// report in Error/Type.
	Sender bool
}

// injectedError is the answer for an injected fault on a call of c's protocol.
func injectedError(c *call, kind string) awsError {
	switch kind {
	case faultThrottle:
		switch c.Protocol {
		case protoEC2:
			return awsError{http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.", true}
		case protoQuery:
			return awsError{http.StatusBadRequest, "Throttling", "Rate exceeded", true}
		case protoREST:
			return awsError{http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded", true}
		}
		return awsError{http.StatusBadRequest, "ThrottlingException", "Rate exceeded", true}
	case faultError, faultLost:
		if c.Protocol == protoEC2 {
			return awsError{http.StatusInternalServerError, "InternalError", "An internal error has occurred", false}
		}
		return awsError{http.StatusInternalServerError, "InternalFailure", "The request processing has failed because of an unknown error, exception or failure.", false}
	case faultAccessDenied:
		return accessDenied(c, fmt.Sprintf("User: arn:aws:sts::%s:assumed-role/joiner/fake-aws is not authorized to perform: %s because no identity-based policy allows the %s action", accountID, c.key(), c.key()))
	}
	return awsError{http.StatusInternalServerError, "InternalFailure", "unknown fault " + kind, false}
}

// accessDenied is the refusal of an IAM policy without the permission, in
// c's protocol: EC2's UnauthorizedOperation, the query protocols'
// AccessDenied, the JSON ones' AccessDeniedException.
func accessDenied(c *call, msg string) awsError {
	switch c.Protocol {
	case protoEC2:
		return awsError{http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation. " + msg, true}
	case protoQuery:
		return awsError{http.StatusForbidden, "AccessDenied", msg, true}
	case protoREST:
		return awsError{http.StatusForbidden, "AccessDeniedException", msg, true}
	}
	return awsError{http.StatusBadRequest, "AccessDeniedException", msg, true}
}

// write answers with e in c's protocol, so the SDK reads e.Code as the
// error code.
func (e awsError) write(w http.ResponseWriter, c *call) {
	reqID := uuid.NewString()
	w.Header().Set("X-Amzn-Requestid", reqID)
	var body string
	switch c.Protocol {
	case protoEC2:
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			xmlEscape(e.Code), xmlEscape(e.Message), reqID)
	case protoQuery:
		typ := "Receiver"
		if e.Sender {
			typ = "Sender"
		}
		w.Header().Set("Content-Type", "text/xml")
		body = fmt.Sprintf(`<ErrorResponse><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			typ, xmlEscape(e.Code), xmlEscape(e.Message), reqID)
	case protoJSON:
		ct := c.JSONType
		if ct == "" {
			ct = "application/x-amz-json-1.1"
		}
		w.Header().Set("Content-Type", ct)
		if c.Service == "sqs" {
			// SQS speaks JSON but keeps its query-era error codes.
			w.Header().Set("X-Amzn-Query-Error", e.Code+";"+map[bool]string{true: "Sender", false: "Receiver"}[e.Sender])
		}
		b, _ := json.Marshal(map[string]string{"__type": e.Code, "message": e.Message})
		body = string(b)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", e.Code)
		b, _ := json.Marshal(map[string]string{"message": e.Message})
		body = string(b)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(body))
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
