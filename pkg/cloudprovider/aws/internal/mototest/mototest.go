// Package mototest runs moto_server as a child process for a test package's
// TestMain, so that the aws packages' tests talk to an independent AWS
// emulator over HTTP through the real SDK, configured the way production
// is: by the SDK's standard AWS_ENDPOINT_URL variable.
package mototest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Server is a running moto_server.
type Server struct {
	// URL is the endpoint, e.g. http://127.0.0.1:40123.
	URL string
	cmd *exec.Cmd
}

// Start starts moto_server on a free loopback port with extra environment
// (e.g. MOTO_AMIS_PATH), waits until it answers, and points the SDK at it
// through this process's environment (AWS_ENDPOINT_URL, test credentials,
// us-east-1). It fails with the fix when moto_server is not installed.
func Start(extraEnv ...string) (*Server, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not installed (pip install 'moto[server]'): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), extraEnv...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting moto_server: %w", err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// moto needs a few seconds to import its services; poll until it
	// answers, bounded, and give up at once if it exits.
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get(s.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case werr := <-exited:
			return nil, fmt.Errorf("moto_server exited before answering: %v", werr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("moto_server did not answer within 60s")
		}
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL":      s.URL,
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION":            "us-east-1",
		// Keep a developer's shared config (profiles, SSO) out of tests.
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		os.Setenv(k, v)
	}
	return s, nil
}

// Reset drops everything the tests created, so that tests do not see each
// other's resources.
func (s *Server) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("moto reset: %s", resp.Status)
	}
	return nil
}

// Stop ends the child process.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
