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
	byAddr map[string]int                     // by addrClass: an IPv6 address by its /64
	conns  map[string]map[*limitedConn]uint64 // open connections by class, with their accept order
	seq    uint64
}

func newLimitListener(ln net.Listener, max, perAddr int, plain bool, log *refuselog.Log) *limitListener {
	return &limitListener{Listener: ln, max: max, perAddr: perAddr, plain: plain, log: log, byAddr: map[string]int{},
		conns: map[string]map[*limitedConn]uint64{}}
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
		var evict *limitedConn
		switch {
		case l.perAddr > 0 && l.byAddr[host] >= l.perAddr:
			limit = "max_conns_per_addr"
		case l.max > 0 && l.total >= l.max:
			// Full: a newcomer from an address holding fewer connections
			// than the busiest one takes that one's newest connection's
			// place, so that strangers holding every slot from a few
			// addresses cannot shut a pipeline out; otherwise refused.
			evict = l.fairShareLocked(host)
			if evict == nil {
				limit = "max_conns"
			}
		}
		var lc *limitedConn
		if limit == "" {
			l.total++
			l.byAddr[host]++
			l.seq++
			lc = &limitedConn{Conn: c, l: l, host: host}
			if l.conns[host] == nil {
				l.conns[host] = map[*limitedConn]uint64{}
			}
			l.conns[host][lc] = l.seq
			metrics.APIConnections(1)
		}
		l.mu.Unlock()
		if evict != nil {
			metrics.APIConnectionRefused("evicted")
			l.log.Refused("api_conn_evicted", evict.host, "what", "pipeline API connection closed: max_conns reached, its address held the most; a connection from an address with fewer took its place",
				"remote", evict.RemoteAddr().String(), "for", c.RemoteAddr().String(), "max_conns", l.max)
			evict.Close()
		}
		if limit == "" {
			return lc, nil
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

// fairShareLocked picks the connection to close for a newcomer from host
// when the listener is full: the newest of the address holding the most,
// if that address holds at least two more than host would; nil when none.
func (l *limitListener) fairShareLocked(host string) *limitedConn {
	busiest, most := "", 0
	for h, n := range l.byAddr {
		if n > most || n == most && h < busiest {
			busiest, most = h, n
		}
	}
	if busiest == host || most < l.byAddr[host]+2 {
		return nil
	}
	var newest *limitedConn
	var at uint64
	for c, seq := range l.conns[busiest] {
		if seq > at {
			newest, at = c, seq
		}
	}
	if newest != nil {
		// Counted out now: the next newcomer picks another.
		l.forgetLocked(newest)
	}
	return newest
}

func (l *limitListener) release(c *limitedConn) {
	l.mu.Lock()
	if _, open := l.conns[c.host][c]; !open {
		l.mu.Unlock()
		return // evicted: already counted out
	}
	l.forgetLocked(c)
	l.mu.Unlock()
}

func (l *limitListener) forgetLocked(c *limitedConn) {
	host := c.host
	delete(l.conns[host], c)
	if len(l.conns[host]) == 0 {
		delete(l.conns, host)
	}
	l.total--
	if l.byAddr[host]--; l.byAddr[host] <= 0 {
		delete(l.byAddr, host)
	}
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
	c.once.Do(func() { c.l.release(c) })
	return err
}
