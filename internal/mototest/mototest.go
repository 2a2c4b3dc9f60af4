// Package mototest runs moto_server for a test package, so tests talk to
// AWS's wire protocols through the real SDK, and puts a small front before
// it that can answer chosen actions with an AWS error (AccessDenied,
// UnauthorizedOperation, ...), which moto itself cannot be asked to do.
//
// One moto per test package, from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }
//
// Main points the SDK at the front through AWS_ENDPOINT_URL, with test
// credentials and AWS_REGION=us-east-1.
package mototest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Region is the region Main configures.
const Region = "us-east-1"

// Front is the endpoint tests use: moto, with injected errors.
type Front struct {
	// URL is the endpoint, as set in AWS_ENDPOINT_URL.
	URL string
	// MotoURL is moto itself.
	MotoURL string

	mu     sync.Mutex
	faults map[string]fault
	calls  map[string]int
}

type fault struct{ code, message string }

var current *Front

// Current is the front Main started.
func Current() *Front { return current }

// Main starts moto and the front, runs the tests and stops both.
func Main(m *testing.M) int {
	f, stop, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	current = f
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": f.URL, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": Region, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		os.Setenv(k, v)
	}
	return m.Run()
}

// Start runs moto_server as a child on a free loopback port, waits until it
// answers, and starts the front before it.
func Start() (*Front, func(), error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, nil, fmt.Errorf("moto_server not found: install it with pip install 'moto[server]'")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting moto_server: %w", err)
	}
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	motoURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(motoURL + "/moto-api/data.json")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			kill()
			return nil, nil, fmt.Errorf("moto_server did not answer on %s within 60s: %v\n%s", motoURL, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := &Front{MotoURL: motoURL, faults: map[string]fault{}, calls: map[string]int{}}
	target, _ := url.Parse(motoURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		service, action := serviceOf(r), actionOf(r, body)
		f.mu.Lock()
		f.calls[service+":"+action]++
		flt, ok := f.faults[service+":"+action]
		if !ok {
			flt, ok = f.faults[service+":*"]
		}
		f.mu.Unlock()
		if ok {
			writeError(w, service, flt)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	f.URL = srv.URL
	return f, func() { srv.Close(); kill() }, nil
}

// Fail makes every later call of service's action (e.g. "ec2",
// "DescribeSubnets"; action "*" for all) answer HTTP 403 with code and
// message, in the service's own error format.
func (f *Front) Fail(service, action, code, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[service+":"+action] = fault{code: code, message: message}
}

// Heal removes every injected fault.
func (f *Front) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = map[string]fault{}
}

// Calls is how many calls of service's action the front has seen.
func (f *Front) Calls(service, action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[service+":"+action]
}

// Reset empties moto (every service, every region), heals the front and
// zeroes its call counts, so a test starts from nothing.
func (f *Front) Reset(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	f.faults, f.calls = map[string]fault{}, map[string]int{}
	f.mu.Unlock()
	resp, err := http.Post(f.MotoURL+"/moto-api/reset", "application/json", nil)
	if err != nil {
		t.Fatalf("resetting moto: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resetting moto: HTTP %d", resp.StatusCode)
	}
}

var scope = regexp.MustCompile(`Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request`)

func serviceOf(r *http.Request) string {
	if m := scope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return ""
}

func actionOf(r *http.Request, body []byte) string {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		return target[strings.LastIndex(target, ".")+1:]
	}
	if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") != "" {
		return v.Get("Action")
	}
	return r.URL.Query().Get("Action")
}

// writeError answers as the service would: EC2's query protocol and the
// awsquery services (IAM, STS) use different XML, JSON services a JSON body.
func writeError(w http.ResponseWriter, service string, f fault) {
	switch service {
	case "ec2":
		f.code, f.message = xmlEscape(f.code), xmlEscape(f.message)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>mototest</RequestID></Response>`, f.code, f.message)
	case "iam", "sts":
		f.code, f.message = xmlEscape(f.code), xmlEscape(f.message)
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>mototest</RequestId></ErrorResponse>`, f.code, f.message)
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-ErrorType", f.code)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":%q,"message":%q}`, f.code, f.message)
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
