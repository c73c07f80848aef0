package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of the test server, for database faults
// at exact moments without touching the shared server: it cuts every
// connection through it (a restarted server, or pg_terminate_backend),
// refuses new ones (a server that is down), cuts a connection when its
// client sends COMMIT (before or after the server has it), and can make
// the server look like a read-only standby to new connections.
//
// It reads the client's side of the protocol message by message (the
// test server runs without TLS: sslmode=disable).
type Proxy struct {
	tb       testing.TB
	ln       net.Listener
	upstream string // host:port of the server

	mu       sync.Mutex
	conns    map[*proxyConn]struct{}
	down     bool
	silent   bool
	held     []net.Conn // accepted while silent, never answered
	readOnly bool
	cut      CommitCut
	accepted int
}

// CommitCut says what a proxy does with the next COMMIT a client sends.
type CommitCut int

const (
	// PassCommits forwards commits: no fault.
	PassCommits CommitCut = iota
	// CutBeforeCommit drops the next COMMIT and cuts its connection: the
	// server never has it and rolls the transaction back.
	CutBeforeCommit
	// CutAfterCommit forwards the next COMMIT, waits for the server's
	// answer (the transaction is committed) and cuts the connection
	// instead of passing it on: the client cannot know that it committed.
	CutAfterCommit
)

type proxyConn struct {
	client, server net.Conn
	// commitSent is set when a CutAfterCommit commit was forwarded: the
	// server's next bytes are its answer, swallowed, and the connection
	// is cut.
	commitSent chan struct{}
	closed     chan struct{}
	once       sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
		close(c.closed)
	})
}

// NewProxy starts a proxy to the server dsn names (a postgres:// URL of
// one host) and returns dsn pointing at the proxy, and the proxy. It is
// closed when tb ends.
func NewProxy(tb testing.TB, dsn string) (string, *Proxy) {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || strings.Contains(u.Host, ",") {
		tb.Fatalf("pgtest proxy: want a postgres:// URL of one host, got %q (%v)", dsn, err)
	}
	upstream := u.Host
	if u.Port() == "" {
		upstream = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest proxy: %v", err)
	}
	p := &Proxy{tb: tb, ln: ln, upstream: upstream, conns: map[*proxyConn]struct{}{}}
	go p.accept()
	tb.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return u.String(), p
}

// Addr is the proxy's host:port, for a DSN of several hosts.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutAll cuts every connection through the proxy now, as a restarted
// server or pg_terminate_backend does. New connections are let through.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for c := range conns {
		c.close()
	}
	for _, c := range held {
		c.Close()
	}
}

// SetSilent makes the server a host that does not answer (a network
// partition, a failed-over address nothing listens behind yet): every
// connection is cut, and new ones are accepted but never answered, so a
// client waits on its own timeouts. Off again, new connections are let
// through, and the connections held unanswered are reset, as when a
// partition heals.
func (p *Proxy) SetSilent(silent bool) {
	p.mu.Lock()
	p.silent = silent
	p.mu.Unlock()
	p.CutAll()
}

// SetDown makes the server unreachable (down: every connection is cut
// and new ones are closed as soon as they are accepted) or reachable
// again.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.CutAll()
	}
}

// SetReadOnly makes new connections read-only sessions
// (default_transaction_read_only=on in their startup packet), as a hot
// standby's are: writes fail with SQLSTATE 25006, and
// target_session_attrs=read-write passes the host by. Connections already
// open keep what they had.
func (p *Proxy) SetReadOnly(ro bool) {
	p.mu.Lock()
	p.readOnly = ro
	p.mu.Unlock()
}

// CutCommit arms the proxy for the next COMMIT any client sends through
// it; it cuts one and goes back to PassCommits.
func (p *Proxy) CutCommit(mode CommitCut) {
	p.mu.Lock()
	p.cut = mode
	p.mu.Unlock()
}

// Armed reports whether a CutCommit is still waiting for its COMMIT.
func (p *Proxy) Armed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut != PassCommits
}

// Accepted counts the connections the proxy passed on to the server.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) close() {
	p.ln.Close()
	p.CutAll()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		down, silent, ro := p.down, p.silent, p.readOnly
		if silent {
			p.held = append(p.held, client)
		}
		p.mu.Unlock()
		if down {
			client.Close()
			continue
		}
		if silent {
			continue
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server, commitSent: make(chan struct{}), closed: make(chan struct{})}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.accepted++
		p.mu.Unlock()
		go p.clientToServer(c, ro)
		go p.serverToClient(c)
	}
}

func (p *Proxy) forget(c *proxyConn) {
	c.close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Protocol codes of the untyped first messages.
const (
	protocol3   = 196608
	sslRequest  = 80877103
	gssRequest  = 80877104
	cancelCode  = 80877102
	maxProtoMsg = 1 << 30
)

// clientToServer copies the client's messages to the server, rewriting
// the startup packet for a read-only session and watching for COMMIT.
func (p *Proxy) clientToServer(c *proxyConn, readOnly bool) {
	defer p.forget(c)
	// The untyped messages first: SSL or GSS requests (answered 'N' by
	// a server without TLS, then the client sends its startup packet),
	// a cancel request, or the startup packet.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		if n < 8 || n > maxProtoMsg {
			return
		}
		rest := make([]byte, n-8)
		if _, err := io.ReadFull(c.client, rest); err != nil {
			return
		}
		if code == protocol3 && readOnly {
			rest = withReadOnlyOption(rest)
			binary.BigEndian.PutUint32(hdr[:4], uint32(8+len(rest)))
		}
		if _, err := c.server.Write(append(hdr[:], rest...)); err != nil {
			return
		}
		if code == protocol3 || code == cancelCode {
			break
		}
		if code != sslRequest && code != gssRequest {
			return
		}
	}
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n < 4 || n > maxProtoMsg {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c.client, body); err != nil {
			return
		}
		mode := PassCommits
		if isCommit(hdr[0], body) {
			p.mu.Lock()
			mode, p.cut = p.cut, PassCommits
			p.mu.Unlock()
		}
		if mode == CutBeforeCommit {
			return // dropped; forget cuts both sides
		}
		if mode == CutAfterCommit {
			// Before the write: whatever the server sends after it is
			// the commit's answer.
			close(c.commitSent)
		}
		if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
			return
		}
		if mode == CutAfterCommit {
			<-c.closed // serverToClient cuts the connection once the server answered
			return
		}
	}
}

// serverToClient copies the server's bytes to the client; after a
// CutAfterCommit commit was forwarded, it swallows the server's answer
// and cuts the connection.
func (p *Proxy) serverToClient(c *proxyConn) {
	defer p.forget(c)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		select {
		case <-c.commitSent:
			// Everything the server sends from here on answers the
			// commit (the client waits for it and sends nothing else):
			// it committed. Cut without passing it on.
			return
		default:
		}
		if n > 0 {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// isCommit reports whether a client message runs COMMIT: a simple query
// ('Q', what pgx sends for Tx.Commit) or a statement being parsed ('P').
func isCommit(typ byte, body []byte) bool {
	var q []byte
	switch typ {
	case 'Q':
		q = body
	case 'P':
		_, after, ok := bytes.Cut(body, []byte{0}) // statement name
		if !ok {
			return false
		}
		q = after
	default:
		return false
	}
	q, _, _ = bytes.Cut(q, []byte{0})
	s := strings.TrimRight(strings.TrimSpace(string(q)), ";")
	return strings.EqualFold(s, "commit") || strings.EqualFold(s, "end") || strings.EqualFold(s, "commit transaction")
}

// withReadOnlyOption adds default_transaction_read_only=on to a startup
// packet's parameters (the "options" parameter: command-line switches
// for the session).
func withReadOnlyOption(params []byte) []byte {
	const opt = "-c default_transaction_read_only=on"
	var out []byte
	found := false
	rest := params
	for len(rest) > 1 {
		k, after, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			break
		}
		v, after2, ok := bytes.Cut(after, []byte{0})
		if !ok {
			break
		}
		rest = after2
		if string(k) == "options" {
			found = true
			v = append(append(append([]byte{}, v...), ' '), opt...)
		}
		out = append(append(append(append(out, k...), 0), v...), 0)
	}
	if !found {
		out = append(append(append(out, "options"...), 0), opt...)
		out = append(out, 0)
	}
	return append(out, 0)
}

// TerminateBackends terminates, on the server admin is connected to,
// every backend whose application_name is app (pg_terminate_backend, as
// an operator or a restart of the server would, but only a test's own
// backends: the server is shared), and waits until they have exited.
func TerminateBackends(tb testing.TB, admin *sql.DB, app string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// In the select list, not the WHERE clause: there the planner may
	// call it before the other conditions, on every backend.
	rows, err := admin.QueryContext(ctx, `SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app)
	if err != nil {
		tb.Fatalf("pg_terminate_backend: %v", err)
	}
	var pids []int64
	for rows.Next() {
		var pid int64
		var ok bool
		if err := rows.Scan(&pid, &ok); err != nil {
			tb.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Close(); err != nil {
		tb.Fatal(err)
	}
	if len(pids) == 0 {
		tb.Fatalf("no backend with application_name %q to terminate", app)
	}
	// pg_terminate_backend only signals them.
	for {
		var left int
		if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			tb.Fatalf("terminated backends: %v", err)
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("%d terminated backends still there after 30 s", left)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Cluster is a primary and its standby as a DSN of two hosts sees them:
// two proxies to a new schema of the server, the standby's read-only,
// named standby first in a connection string with
// target_session_attrs=read-write. SetReadOnly(false) on the standby and
// SetDown(true) on the primary is a failover.
func Cluster(tb testing.TB) (dsn string, standby, primary *Proxy) {
	tb.Helper()
	base := URL(tb)
	_, standby = NewProxy(tb, base)
	_, primary = NewProxy(tb, base)
	standby.SetReadOnly(true)
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Host = standby.Addr() + "," + primary.Addr()
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	return u.String(), standby, primary
}
