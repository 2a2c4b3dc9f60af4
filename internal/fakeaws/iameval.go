package fakeaws

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// evaluateJS is the evaluator's program, run by node with the modules the
// setup installed (hack/setup.sh: iamsim=...).
//
//go:embed iamsim/evaluate.js
var evaluateJS []byte

// PolicyDocument is one policy of an identity, by name; Policy is the
// decoded JSON document.
type PolicyDocument struct {
	Name   string `json:"name"`
	Policy any    `json:"policy"`
}

// authCheck is one authorization AWS makes for a request: an action on a
// resource, with the request's context keys. A call may make several (a
// CreateFleet is authorized on each resource it uses and creates).
type authCheck struct {
	Action   string              `json:"action"`
	Resource string              `json:"resource"`
	Context  map[string][]string `json:"context"`
}

type evalQuestion struct {
	ID        int64            `json:"id"`
	Principal string           `json:"principal"`
	Action    string           `json:"action"`
	Resource  string           `json:"resource"`
	Account   string           `json:"account"`
	Context   map[string]any   `json:"context"`
	Policies  []PolicyDocument `json:"policies"`
	// Unvalidated skips the evaluator's input checks, which reject the
	// account-less ARNs of AWS's public SSM parameters.
	Unvalidated bool `json:"unvalidated,omitempty"`
}

type evalAnswer struct {
	ID     int64  `json:"id"`
	Result string `json:"result"`
	Error  string `json:"error"`
}

// evaluator runs the IAM evaluator (@cloud-copilot/iam-simulate, AGPL-3.0)
// as a child process, never linked: one question a line on its stdin, one
// answer a line on its stdout, matched by id so that concurrent calls
// share the process.
type evaluator struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	dir  string
	mu   sync.Mutex // guards in, next and waiting
	next int64
	wait map[int64]chan evalAnswer
	dead error
}

// startEvaluator runs node on the embedded program with modules (the
// node_modules folder holding @cloud-copilot/iam-simulate).
func startEvaluator(modules string) (*evaluator, error) {
	if modules == "" {
		return nil, errors.New("fake-aws: --iam-enforce needs the IAM evaluator's node_modules (--iam-simulate-modules; hack/setup.sh installs it and prints iamsim=...)")
	}
	if _, err := os.Stat(filepath.Join(modules, "@cloud-copilot", "iam-simulate")); err != nil {
		return nil, fmt.Errorf("fake-aws: %s lacks @cloud-copilot/iam-simulate: run hack/setup.sh (%w)", modules, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("fake-aws: --iam-enforce runs the IAM evaluator with node: install Debian's nodejs (%w)", err)
	}
	dir, err := os.MkdirTemp("", "fake-aws-iamsim-")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "evaluate.js")
	if err := os.WriteFile(script, evaluateJS, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &evaluator{dir: dir, wait: map[int64]chan evalAnswer{}}
	e.cmd = exec.Command(node, script)
	e.cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	e.cmd.Stderr = os.Stderr
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if e.in, err = e.cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("fake-aws: starting the IAM evaluator: %w", err)
	}
	go e.read(out)
	return e, nil
}

func (e *evaluator) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var a evalAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			continue
		}
		e.mu.Lock()
		ch := e.wait[a.ID]
		delete(e.wait, a.ID)
		e.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dead = errors.New("fake-aws: the IAM evaluator exited")
	for id, ch := range e.wait {
		ch <- evalAnswer{ID: id, Error: e.dead.Error()}
		delete(e.wait, id)
	}
}

// allowed asks whether policies let principal make check; the answer is the
// evaluator's: Allowed, ImplicitlyDenied, ExplicitlyDenied, or
// NotApplicable when AWS makes no such check (the action has no
// authorization on that resource type).
func (e *evaluator) allowed(ctx context.Context, principal string, policies []PolicyDocument, check authCheck) (string, error) {
	vars := make(map[string]any, len(check.Context))
	for k, v := range check.Context {
		if len(v) == 1 && k != "aws:TagKeys" {
			vars[k] = v[0]
		} else {
			vars[k] = v
		}
	}
	ch := make(chan evalAnswer, 1)
	e.mu.Lock()
	if e.dead != nil {
		e.mu.Unlock()
		return "", e.dead
	}
	e.next++
	q := evalQuestion{ID: e.next, Principal: principal, Action: check.Action, Resource: check.Resource, Account: accountID, Context: vars, Policies: policies,
		Unvalidated: strings.HasPrefix(check.Resource, "arn:aws:ssm:") && strings.Contains(check.Resource, "::parameter/")}
	e.wait[q.ID] = ch
	line, err := json.Marshal(q)
	if err == nil {
		_, err = e.in.Write(append(line, '\n'))
	}
	e.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("fake-aws: asking the IAM evaluator: %w", err)
	}
	select {
	case a := <-ch:
		if a.Error != "" && a.Result == "" {
			return "", fmt.Errorf("fake-aws: the IAM evaluator refused %s on %s: %s", check.Action, check.Resource, a.Error)
		}
		return a.Result, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (e *evaluator) stop() {
	if e == nil {
		return
	}
	_ = e.in.Close()
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
	os.RemoveAll(e.dir)
}
