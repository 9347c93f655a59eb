package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/skipprd/skipprd/internal/pgurl"
)

// proxy is a TCP proxy between pgx and the server that, once armed, cuts
// the connection carrying the next COMMIT. pgx sends COMMIT as a simple
// query: a 'Q' message whose text is "commit". The proxy parses the
// client's messages (a startup message, then type byte, length, body)
// and passes the server's bytes through untouched.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string // the server's host:port
	url    string // the database URL through the proxy

	mu    sync.Mutex
	mode  cutMode // what the next COMMIT meets; cutNone once it did
	conns []net.Conn
	cuts  int // COMMITs cut so far
}

type cutMode int

const (
	cutNone         cutMode = iota
	cutBeforeCommit         // the COMMIT never reaches the server; both sides are closed
	cutAfterCommit          // the COMMIT reaches the server; its answer never reaches the client
)

// proxyMessageBytesMax bounds one client message (pgx's COPY data
// messages are 64 KiB).
const proxyMessageBytesMax = 1 << 24

// newProxy starts a proxy to the server of dbURL and returns it; its url
// is dbURL through the proxy. It stops when t ends.
func newProxy(t testing.TB, dbURL string) *proxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse %s: %v", pgurl.Redact(dbURL), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &proxy{t: t, ln: ln, target: u.Host}
	q := u.Query()
	q.Set("sslmode", "disable") // the proxy reads the protocol in clear
	u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
	p.url = u.String()
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// arm makes the next COMMIT meet mode.
func (p *proxy) arm(mode cutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

// cutCount is how many COMMITs were cut.
func (p *proxy) cutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		l := &link{client: client, server: server}
		go l.serverToClient()
		go l.clientToServer(p)
	}
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	muted          bool // the server's bytes are dropped, never sent on
}

func (l *link) serverToClient() {
	buf := make([]byte, 64<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			l.mu.Lock()
			if !l.muted {
				_, _ = l.client.Write(buf[:n])
			}
			l.mu.Unlock()
		}
		if err != nil {
			l.mu.Lock()
			if !l.muted {
				_ = l.client.Close()
			}
			l.mu.Unlock()
			return
		}
	}
}

func (l *link) clientToServer(p *proxy) {
	keepServer := false
	defer func() {
		if !keepServer {
			_ = l.server.Close()
		}
	}()
	if err := l.forwardStartup(); err != nil {
		p.t.Errorf("proxy: startup: %v", err)
		_ = l.client.Close()
		return
	}
	for {
		typ, msg, err := readMessage(l.client)
		if err != nil {
			return // the client went away
		}
		if typ == 'Q' && isCommit(msg) {
			if mode := p.takeCut(); mode != cutNone {
				keepServer = l.cut(mode, msg)
				return
			}
		}
		if _, err := l.server.Write(msg); err != nil {
			_ = l.client.Close()
			return
		}
	}
}

// cut carries out mode on the COMMIT message msg, and says whether the
// server side stays open: after a forwarded COMMIT it does (serverToClient
// reads and drops the answer), so that nothing but the COMMIT decides
// what the server does; the proxy closes it when the test ends.
func (l *link) cut(mode cutMode, msg []byte) (keepServer bool) {
	l.mu.Lock()
	l.muted = true
	l.mu.Unlock()
	if mode == cutAfterCommit {
		_, _ = l.server.Write(msg)
	}
	_ = l.client.Close()
	return mode == cutAfterCommit
}

// takeCut returns the armed mode and disarms the proxy.
func (p *proxy) takeCut() cutMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	mode := p.mode
	if mode != cutNone {
		p.mode, p.cuts = cutNone, p.cuts+1
	}
	return mode
}

// forwardStartup passes the client's startup message on. An SSL or GSS
// encryption request means the client will not speak in clear.
func (l *link) forwardStartup() error {
	var head [8]byte
	if _, err := io.ReadFull(l.client, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:4])
	code := binary.BigEndian.Uint32(head[4:])
	if code == 80877103 || code == 80877104 {
		return errors.New("the client asked for encryption; the proxy needs sslmode=disable")
	}
	if n < 8 || n > proxyMessageBytesMax {
		return fmt.Errorf("startup message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	if _, err := io.ReadFull(l.client, msg[8:]); err != nil {
		return err
	}
	_, err := l.server.Write(msg)
	return err
}

// readMessage reads one message: its type and its whole bytes.
func readMessage(r io.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > proxyMessageBytesMax {
		return 0, nil, fmt.Errorf("message %q of %d bytes", head[0], n)
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return head[0], msg, nil
}

// isCommit reports whether a 'Q' message's query is COMMIT.
func isCommit(msg []byte) bool {
	query := strings.TrimSpace(strings.TrimRight(string(msg[5:]), "\x00"))
	return strings.EqualFold(strings.TrimSuffix(query, ";"), "commit")
}
