package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIFaults stands between Joiner and the local control plane's API
// server and fails the writes its rules choose, as a real cluster does to
// a controller: a conflict when another writer got there first, a 500 or
// 503 during an etcd leader change or an overloaded API server. Reads and
// watches pass through untouched. Start Joiner with Env() to put it behind
// the proxy.
type APIFaults struct {
	// Kubeconfig is a kubeconfig for the proxy (plain HTTP on localhost;
	// the proxy speaks to the API server with the cluster's credentials).
	Kubeconfig string

	mu    sync.Mutex
	rules []*APIFault
	rand  *rand.Rand
	// Failed are the requests failed so far, as "METHOD path -> status".
	failed []string
	writes []APIWrite
}

// APIWrite is one write Joiner sent through the proxy, and how it ended:
// an observer of what Joiner did that does not rely on Joiner's own logs
// or events.
type APIWrite struct {
	Time                          time.Time
	Method, Resource, Subresource string
	Namespace, Name               string
	// Status is the API server's answer, or the injected failure's.
	Status   int
	Injected bool
}

// APIFault fails requests that match all of its set fields.
type APIFault struct {
	Method string // PATCH, PUT, POST or DELETE
	// Resource is the plural resource (nodeclaims, nodes); Subresource
	// "status", "eviction" or "" for the object itself.
	Resource    string
	Subresource string
	// BodyContains picks requests whose body has this text, such as
	// "providerID" for the write that records a launch.
	BodyContains string
	// Status is the answer: 409 (a conflict), 500, 503 or 429.
	Status int
	// Times is how many requests to fail at most; zero means no limit.
	Times int
	// Rate fails that share of the matching requests; zero means all.
	Rate float64

	done int
}

// StartAPIFaults starts the proxy; it stops when the test ends.
func StartAPIFaults(t testing.TB, seed int64) *APIFaults {
	t.Helper()
	upstream, err := url.Parse(Cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &APIFaults{rand: rand.New(rand.NewSource(seed))}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	// A killed Joiner's requests end with its process: that is the test,
	// not an error worth a line.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, reason := f.decide(r); status != 0 {
			f.fail(w, r, status, reason)
			f.record(r, status, true)
			return
		}
		if r.Method == http.MethodGet {
			proxy.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		f.record(r, sw.status, false)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	f.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, f.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return f
}

// Env is the setting that puts a Joiner started with it behind the proxy.
func (f *APIFaults) Env() string { return "KUBECONFIG=" + f.Kubeconfig }

// Set replaces the rules.
func (f *APIFaults) Set(rules ...APIFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
	for i := range rules {
		r := rules[i]
		f.rules = append(f.rules, &r)
	}
}

// Failed lists the requests failed so far.
func (f *APIFaults) Failed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.failed...)
}

// Writes lists the writes so far that keep returns true for.
func (f *APIFaults) Writes(keep func(APIWrite) bool) []APIWrite {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []APIWrite
	for _, w := range f.writes {
		if keep(w) {
			out = append(out, w)
		}
	}
	return out
}

func (f *APIFaults) record(r *http.Request, status int, injected bool) {
	if r.Method == http.MethodGet {
		return
	}
	resource, sub := resourceOf(r.URL.Path)
	w := APIWrite{Time: time.Now(), Method: r.Method, Resource: resource, Subresource: sub, Namespace: namespaceOf(r.URL.Path), Name: nameOf(r.URL.Path), Status: status, Injected: injected}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, w)
}

// statusWriter keeps the status a response was written with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// decide returns the status to fail r with, or 0 to pass it on.
func (f *APIFaults) decide(r *http.Request) (int, string) {
	if r.Method == http.MethodGet {
		return 0, ""
	}
	resource, sub := resourceOf(r.URL.Path)
	var body []byte
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rule := range f.rules {
		if rule.Method != r.Method || rule.Resource != resource || rule.Subresource != sub {
			continue
		}
		if rule.Times > 0 && rule.done >= rule.Times {
			continue // spent
		}
		if rule.BodyContains != "" {
			if body == nil {
				body, _ = io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			if !bytes.Contains(body, []byte(rule.BodyContains)) {
				continue
			}
		}
		if rule.Rate > 0 && f.rand.Float64() >= rule.Rate {
			continue
		}
		rule.done++
		f.failed = append(f.failed, fmt.Sprintf("%s %s -> %d", r.Method, r.URL.Path, rule.Status))
		return rule.Status, fmt.Sprintf("injected by the test's API fault proxy (%s %s/%s)", rule.Method, rule.Resource, rule.Subresource)
	}
	return 0, ""
}

// fail answers as the API server does, with a Status object.
func (f *APIFaults) fail(w http.ResponseWriter, r *http.Request, status int, reason string) {
	resource, _ := resourceOf(r.URL.Path)
	gr := schema.GroupResource{Resource: resource}
	name := nameOf(r.URL.Path)
	var st *apierrors.StatusError
	switch status {
	case http.StatusConflict:
		st = apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again (%s)", reason))
	case http.StatusTooManyRequests:
		st = apierrors.NewTooManyRequests(reason, 1)
	case http.StatusServiceUnavailable:
		st = apierrors.NewServiceUnavailable(reason)
	default:
		st = apierrors.NewInternalError(fmt.Errorf("%s", reason))
	}
	st.ErrStatus.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.ErrStatus.Code))
	_ = json.NewEncoder(w).Encode(st.ErrStatus)
}

// resourceOf reads the resource and subresource of an API path:
// /api/v1/nodes/<name>[/status], /apis/<group>/<version>/nodeclaims/<name>[/status],
// /api/v1/namespaces/<ns>/pods/<name>/eviction.
func resourceOf(path string) (resource, sub string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "", ""
	}
	if len(parts) >= 3 {
		return parts[0], parts[2]
	}
	return parts[0], ""
}

func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+1 < len(parts) && i+2 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

func nameOf(path string) string {
	resource, sub := resourceOf(path)
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == resource && i+1 < len(parts) && parts[i+1] != sub {
			return parts[i+1]
		}
	}
	return ""
}
