// Package awstest runs moto, the AWS emulator, for the aws provider's tests,
// so they talk to EC2 through the real SDK over HTTP, as the product does.
package awstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Moto is a moto_server child process on a loopback port.
type Moto struct {
	// Endpoint is the server's URL, for AWS_ENDPOINT_URL.
	Endpoint string
	cmd      *exec.Cmd
}

// StartMoto starts moto_server on a free loopback port and waits until it
// answers. It fails with the fix when moto is not installed.
func StartMoto() (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server not found on PATH: install it with pip install 'moto[server]==5.2.1'")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = nil, nil
	// Its own process group, so Stop ends moto's workers with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting moto_server: %w", err)
	}
	m := &Moto{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return m, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("moto_server exited before answering: %v", err)
		case <-ctx.Done():
			m.Stop()
			return nil, fmt.Errorf("moto_server did not answer on %s within a minute", m.Endpoint)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Setenv points the SDK's default configuration at moto with test
// credentials in region.
func (m *Moto) Setenv(region string) {
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL":          m.Endpoint,
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"AWS_REGION":                region,
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		os.Setenv(k, v)
	}
}

// Stop ends moto_server.
func (m *Moto) Stop() {
	if m == nil || m.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for moto_server: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
