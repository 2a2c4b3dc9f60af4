// Package mototest runs moto_server for a test package, so tests talk to
// AWS's wire protocols through the real SDK, and puts a small front before
// it that can answer chosen actions with an AWS error (AccessDenied,
// UnauthorizedOperation, ...), which moto itself cannot be asked to do, and
// counts the calls it forwards. It is the one moto helper of the project.
//
// One moto per test package, from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }
//
// Main points the SDK at the front through its standard AWS_ENDPOINT_URL,
// with test credentials and AWS_REGION=us-east-1, as production is pointed
// at an endpoint; Clients builds the product's own clients from that.
package mototest

import (
	"bytes"
	"context"
	"encoding/json"
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
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
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

// Option changes how Start runs moto.
type Option func(*options)

type options struct {
	amis any
}

// WithAMIs makes moto serve images (moto's AMI records: ami_id, name,
// architecture, creation_date, owner_id, state, platform, tags) instead of
// its default list, through MOTO_AMIS_PATH: moto has no API to register an
// image with an architecture or a creation date, it only loads a list at
// start (and again on Reset).
func WithAMIs(images any) Option { return func(o *options) { o.amis = images } }

var current *Front

// Current is the front Main started.
func Current() *Front { return current }

// Main starts moto and the front, runs the tests and stops both.
func Main(m *testing.M, opts ...Option) int {
	f, stop, err := Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	current = f
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": f.URL, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": Region, "AWS_EC2_METADATA_DISABLED": "true",
		// Keep a developer's shared config (profiles, SSO) out of tests.
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		os.Setenv(k, v)
	}
	return m.Run()
}

// Clients are the product's clients (awsclient.New: its credential chain
// and retry policy) for region, or for Main's region when region is empty,
// pointed at the front by Main's environment.
func Clients(t testing.TB, region string) *awsclient.Clients {
	t.Helper()
	c, err := awsclient.New(context.Background(), awsclient.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Start runs moto_server as a child on a free loopback port, waits until it
// answers, and starts the front before it. The returned function stops
// both.
func Start(opts ...Option) (*Front, func(), error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, nil, fmt.Errorf("moto_server not found: install it with pip install 'moto[server]' (hack/setup.sh checks for it)")
	}
	var cleanup []func()
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	env := os.Environ()
	if o.amis != nil {
		dir, err := os.MkdirTemp("", "mototest")
		if err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		data, err := json.Marshal(o.amis)
		if err != nil {
			undo()
			return nil, nil, fmt.Errorf("encoding moto's AMIs: %w", err)
		}
		path := filepath.Join(dir, "amis.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			undo()
			return nil, nil, err
		}
		env = append(env, "MOTO_AMIS_PATH="+path)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		undo()
		return nil, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Env = env
	// Its own process group, so stopping it ends moto's workers too; and
	// killed with the test binary, should that die without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		undo()
		return nil, nil, fmt.Errorf("starting moto_server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	cleanup = append(cleanup, func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	motoURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	// moto needs a few seconds to import its services: poll until it
	// answers, bounded, and give up at once if it exits.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(motoURL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			undo()
			return nil, nil, fmt.Errorf("moto_server exited before answering on %s:\n%s", motoURL, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			undo()
			return nil, nil, fmt.Errorf("moto_server did not answer on %s within 60s: %v\n%s", motoURL, err, logs.String())
		}
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
	cleanup = append(cleanup, srv.Close)
	f.URL = srv.URL
	return f, undo, nil
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

// Reset empties moto (every service, every region; images given with
// WithAMIs are loaded again), heals the front and zeroes its call counts,
// so a test starts from nothing.
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
