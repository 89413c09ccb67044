package pipelineapi

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	refuselog "github.com/archiveteam/archivebot-go/internal/refusal"
)

// limitListener caps the API's open connections, in total and per remote
// address (doc/pipeline-api.md, Listener). A connection over a cap is
// answered at once with a 503 that says which cap (plain HTTP only: under
// TLS it is closed, the handshake not yet done), closed, logged and
// counted (archivebot_pipelineapi_connections_refused_total{limit}); it
// never waits in Accept, so the sockets the node holds for the API stay
// bounded whatever a peer opens.
type limitListener struct {
	net.Listener
	max, perAddr int  // <= 0: no cap
	plain        bool // the listener serves plain HTTP: refusals get an answer
	log          *refuselog.Log

	mu     sync.Mutex
	total  int
	byAddr map[string]int // by addrClass: an IPv6 address by its /64
}

func newLimitListener(ln net.Listener, max, perAddr int, plain bool, log *refuselog.Log) *limitListener {
	return &limitListener{Listener: ln, max: max, perAddr: perAddr, plain: plain, log: log, byAddr: map[string]int{}}
}

// refusalAnswer is the whole HTTP answer to a connection over a cap.
func refusalAnswer(limit string) []byte {
	body := `{"error":"too_many_connections","reason":"the pipeline API has too many open connections (` + limit + `); retry later"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func remoteHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

// Accept returns the next connection within the caps; those over a cap
// are refused here.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := addrClass(remoteHost(c))
		l.mu.Lock()
		limit := ""
		switch {
		case l.max > 0 && l.total >= l.max:
			limit = "max_conns"
		case l.perAddr > 0 && l.byAddr[host] >= l.perAddr:
			limit = "max_conns_per_addr"
		default:
			l.total++
			l.byAddr[host]++
			metrics.APIConnections(1)
		}
		l.mu.Unlock()
		if limit == "" {
			return &limitedConn{Conn: c, l: l, host: host}, nil
		}
		metrics.APIConnectionRefused(limit)
		l.log.Refused("api_conn_"+limit, host, "what", "pipeline API connection refused: too many open connections",
			"limit", limit, "remote", c.RemoteAddr().String(), "max_conns", l.max, "max_conns_per_addr", l.perAddr)
		if l.plain {
			// A fresh socket's send buffer takes this at once; the
			// deadline keeps a refusal from ever holding Accept up.
			c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			c.Write(refusalAnswer(limit))
		}
		c.Close()
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	l.total--
	if l.byAddr[host]--; l.byAddr[host] <= 0 {
		delete(l.byAddr, host)
	}
	l.mu.Unlock()
	metrics.APIConnections(-1)
}

// open is how many connections are open (for tests).
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// openConns is how many connections Serve's listener has open (-1 before
// Serve).
func (s *Server) openConns() int {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return -1
	}
	return ln.open()
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
