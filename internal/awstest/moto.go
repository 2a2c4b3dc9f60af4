// Package awstest starts moto_server for tests that need a real AWS wire
// protocol, and builds SDK configurations that point at it.
package awstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
)

// Moto is a running moto_server.
type Moto struct {
	URL string
	cmd *exec.Cmd
}

// StartMoto starts moto_server on a free loopback port and waits until it
// answers. It fails, never skips, when moto_server is missing: hack/setup.sh
// names the fix.
func StartMoto() (*Moto, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server not found: install it with pip install 'moto[server]' (hack/setup.sh checks for it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &Moto{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(m.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return m, nil
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("moto_server did not answer on %s: %w", m.URL, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop kills moto_server.
func (m *Moto) Stop() {
	if m.cmd.Process != nil {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		m.cmd.Wait()
	}
}

// Reset clears moto's state between tests.
func (m *Moto) Reset() error {
	resp, err := http.Post(m.URL+"/moto-api/reset", "application/json", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Config is an SDK configuration for region with static test credentials,
// the product's retry policy, and url as every service's endpoint.
func Config(url, region string) aws.Config {
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithRetryer(awsclient.NewRetryer),
		config.WithBaseEndpoint(url),
	)
	if err != nil {
		// LoadDefaultConfig fails only on a broken shared config file.
		fmt.Fprintln(os.Stderr, "awstest:", err)
		os.Exit(1)
	}
	return cfg
}
