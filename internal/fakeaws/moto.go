package fakeaws

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// moto is the moto_server child process.
type moto struct {
	url  string
	cmd  *exec.Cmd
	dir  string
	out  *lockedWriter
	done chan struct{}
	once sync.Once
}

// startMoto runs moto_server on a free loopback port with the node images
// preloaded, and waits until it answers. The child dies with this process
// (SIGKILL on parent death), so a crashed test leaves no moto behind.
func startMoto(ctx context.Context, program string, amis []byte) (*moto, error) {
	if program == "" {
		program = "moto_server"
	}
	path, err := exec.LookPath(program)
	if err != nil {
		return nil, fmt.Errorf("fake-aws: %s not found: install moto with: pip install 'moto[server]' (%w)", program, err)
	}
	dir, err := os.MkdirTemp("", "fake-aws-")
	if err != nil {
		return nil, err
	}
	amiFile, err := tempFile(dir, "amis-*.json", amis)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	m := &moto{url: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir, out: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan struct{})}
	m.cmd = exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	m.cmd.Env = append(os.Environ(), "MOTO_AMIS_PATH="+amiFile)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("fake-aws: starting %s: %w", path, err)
	}
	go func() {
		_ = m.cmd.Wait()
		close(m.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.url+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return m, nil
		}
		select {
		case <-m.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("fake-aws: moto_server exited at start: %s\n%s", m.cmd.ProcessState, m.output())
		case <-ctx.Done():
			m.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("fake-aws: moto_server did not answer on %s within 60s:\n%s", m.url, m.output())
		}
	}
}

func (m *moto) output() string {
	return m.out.String()
}

func (m *moto) stop() {
	m.once.Do(func() {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
		}
		os.RemoveAll(m.dir)
	})
}

// lockedWriter lets the child's stdout and stderr share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 1<<20 {
		l.w.Reset() // keep the tail small: it is only shown when moto dies
	}
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
