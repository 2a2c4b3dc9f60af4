package fakeaws

import (
	"net/http"
	"sync"
)

// clientTokens gives EC2's idempotency to the calls moto runs anew each
// time: a repeated ClientToken with the same parameters gets the first
// successful answer again, and launches nothing; with other parameters it
// gets IdempotentParameterMismatch. Without it a retried launch whose
// first answer was lost would launch twice here, and never on EC2, so a
// test could not tell a client that reuses its token from one that does
// not.
type clientTokens struct {
	mu   sync.Mutex
	seen map[string]*tokenEntry
}

type tokenEntry struct {
	mu     sync.Mutex // held while the first call runs
	params string
	answer *answer
}

// once runs the call, unless an earlier one with its token succeeded.
func (t *clientTokens) once(c *call, run func() *answer) *answer {
	token := c.Form.Get("ClientToken")
	if token == "" {
		return run()
	}
	key := c.Region + "/" + c.key() + "/" + token
	params := c.Form.Encode()
	t.mu.Lock()
	if t.seen == nil {
		t.seen = map[string]*tokenEntry{}
	}
	e, ok := t.seen[key]
	if !ok {
		e = &tokenEntry{params: params}
		t.seen[key] = e
	}
	t.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.params != params {
		return errorAnswer(c, awsError{http.StatusBadRequest, "IdempotentParameterMismatch",
			"The client token " + token + " was already used with other parameters: a retry must repeat the request unchanged, and a new request needs a new token.", true})
	}
	if e.answer != nil {
		replay := *e.answer
		replay.instances, replay.replayed = nil, true
		return &replay
	}
	a := run()
	if a.status == http.StatusOK {
		e.answer = a
	}
	return a
}
