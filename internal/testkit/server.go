package testkit

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a `mergegate serve` process that StartServer started.
type Server struct {
	Pub, Admin string // http://host:port of its public and admin listeners

	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited
	log  SyncBuffer    // its stderr
}

// CleanEnv is the test's environment without MERGEGATE_ and GITHUB_
// variables, so that a developer's own settings do not reach a binary
// under test.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MERGEGATE_") && !strings.HasPrefix(kv, "GITHUB_") {
			env = append(env, kv)
		}
	}
	return env
}

// StartServer runs `bin serve` on free loopback ports, args added (--db,
// --webhook-secret, ...), in CleanEnv, and returns once its start line
// ("mergegate listening") names its addresses. It is killed when the test
// ends, and its log shown if the test failed.
func StartServer(tb testing.TB, bin string, args ...string) *Server {
	tb.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = CleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	ready := make(chan [2]string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.log.Write(line)         //nolint:errcheck
			s.log.Write([]byte{'\n'}) //nolint:errcheck
			var start struct {
				Message   string `json:"message"`
				Addr      string `json:"addr"`
				AdminAddr string `json:"admin_addr"`
			}
			if json.Unmarshal(line, &start) == nil && start.Message == "mergegate listening" {
				ready <- [2]string{start.Addr, start.AdminAddr}
			}
		}
		cmd.Wait() //nolint:errcheck
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck
		<-s.done
		if tb.Failed() {
			tb.Logf("server log:\n%s", s.Log())
		}
	})
	select {
	case a := <-ready:
		s.Pub, s.Admin = "http://"+a[0], "http://"+a[1]
	case <-s.done:
		tb.Fatalf("mergegate exited before listening:\n%s", s.Log())
	case <-time.After(20 * time.Second):
		tb.Fatalf("mergegate did not start:\n%s", s.Log())
	}
	return s
}

// Log is what the server wrote to stderr so far.
func (s *Server) Log() string { return s.log.String() }

// Stop sends SIGTERM and returns the exit status once the process exited.
func (s *Server) Stop(tb testing.TB) int {
	tb.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		tb.Fatal("mergegate did not stop on SIGTERM")
	}
	return s.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process (SIGSTOP, SIGCONT: a process paused and
// resumed; the test's end kills it whatever its state).
func (s *Server) Signal(sig os.Signal) {
	s.cmd.Process.Signal(sig) //nolint:errcheck
}

// Kill ends the process with SIGKILL (no shutdown) and waits for its exit.
func (s *Server) Kill() {
	s.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	<-s.done
}
