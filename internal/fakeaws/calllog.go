package fakeaws

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Call is one AWS call the endpoint answered, as the call log records it.
type Call struct {
	Time    time.Time      `json:"time"`
	Service string         `json:"service"`
	Action  string         `json:"action"`
	Region  string         `json:"region,omitempty"`
	Params  map[string]any `json:"params,omitempty"`
	Status  int            `json:"status"`
	// ErrorCode is the AWS error code of a failed call.
	ErrorCode string `json:"errorCode,omitempty"`
	// ErrorMessage is its message, for refusals under IAMEnforce.
	ErrorMessage string `json:"errorMessage,omitempty"`
	// Fault names the injected fault, if any: throttle, error,
	// lost, accessDenied, insufficientCapacity or describeDelay; or
	// iamDenied, a refusal of the caller's IAM policies (IAMEnforce), or
	// iamError, a call the endpoint could not authorize.
	Fault string `json:"fault,omitempty"`
	// Principal is who signed the call under IAMEnforce: the
	// administrator, or a role's session ARN.
	Principal string `json:"principal,omitempty"`
	// Instances are the instances this call launched (also when its
	// answer was lost).
	Instances []string `json:"instances,omitempty"`
	// Replayed is a call answered with an earlier call's answer, because
	// it repeated that call's client token: it launched nothing.
	Replayed  bool    `json:"replayed,omitempty"`
	LatencyMS float64 `json:"latencyMs"`
}

type callLog struct {
	mu    sync.Mutex
	w     io.Writer
	calls []Call
}

func (l *callLog) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if l.w != nil {
		b, _ := json.Marshal(c)
		_, _ = l.w.Write(append(b, '\n'))
	}
}

// Calls returns the calls answered so far, oldest first, optionally only
// those of one service and action ("" matches any).
func (s *Server) Calls(service, action string) []Call {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	var out []Call
	for _, c := range s.calls.calls {
		if (service == "" || c.Service == service) && (action == "" || c.Action == action) {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the calls answered so far (the log file keeps them).
func (s *Server) ResetCalls() {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	s.calls.calls = nil
}

var (
	xmlCode  = regexp.MustCompile(`<Code>([^<]+)</Code>`)
	jsonType = regexp.MustCompile(`"__type"\s*:\s*"([^"]+)"`)
)

// errorCode reads the AWS error code of a failed answer.
func errorCode(a *answer) string {
	if a.status < 300 {
		return ""
	}
	if c := a.header.Get("X-Amzn-Errortype"); c != "" {
		return c
	}
	if m := xmlCode.FindSubmatch(a.body); m != nil {
		return string(m[1])
	}
	if m := jsonType.FindSubmatch(a.body); m != nil {
		code := string(m[1])
		return code[strings.LastIndex(code, "#")+1:]
	}
	return ""
}
