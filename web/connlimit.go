package web

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/refusal"
)

// ConnLimits cap the open connections of the web and stream listeners
// (http.max_conns, http.max_conns_per_addr; doc/web.md, Limits): HTTP
// requests and live-stream WebSockets alike. 0: no cap.
type ConnLimits struct {
	Total, PerAddr int
}

// limitListener applies ConnLimits at accept. A connection over a cap is
// answered at once with a 503 that names the cap, closed, counted
// (archivebot_web_connections_refused_total{limit}) and logged
// (rate-limited, with counts); it never waits in Accept, so what a peer
// opens never grows the node's sockets past the caps.
type limitListener struct {
	net.Listener
	*connCounter
}

// connCounter counts the open connections of a server's listeners
// together: the caps hold for the web and stream listeners as one.
type connCounter struct {
	lim      ConnLimits
	refusals *refusal.Log

	mu     sync.Mutex
	total  int
	byAddr map[string]int
}

func newConnCounter(lim ConnLimits, refusals *refusal.Log) *connCounter {
	return &connCounter{lim: lim, refusals: refusals, byAddr: map[string]int{}}
}

// wrap applies the caps to ln (ln itself when there are none).
func (cc *connCounter) wrap(ln net.Listener) net.Listener {
	if cc.lim.Total <= 0 && cc.lim.PerAddr <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, connCounter: cc}
}

// addrKey is what the per-address cap counts: an IPv4 address, or the
// /64 of an IPv6 one (one host holds a whole /64).
func addrKey(a net.Addr) string {
	host := a.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

func connRefusal(limit string, n int) []byte {
	body := `{"error":"too many connections to this server (` + limit + ` = ` + strconv.Itoa(n) + `); retry later"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(c.RemoteAddr())
		l.mu.Lock()
		limit, n := "", 0
		switch {
		case l.lim.Total > 0 && l.total >= l.lim.Total:
			limit, n = "max_conns", l.lim.Total
		case l.lim.PerAddr > 0 && l.byAddr[key] >= l.lim.PerAddr:
			limit, n = "max_conns_per_addr", l.lim.PerAddr
		default:
			l.total++
			l.byAddr[key]++
		}
		l.mu.Unlock()
		if limit == "" {
			metrics.WebConnections(1)
			return &limitedConn{Conn: c, l: l.connCounter, key: key}, nil
		}
		metrics.WebConnRefused(limit)
		l.refusals.Refused("web_conns_"+limit, key, "limit", limit, "cap", n, "listener", l.Addr().String())
		// A fresh socket's send buffer takes this at once; the deadline
		// keeps a refusal from ever holding Accept up.
		c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		c.Write(connRefusal(limit, n))
		c.Close()
	}
}

func (l *connCounter) release(key string) {
	l.mu.Lock()
	l.total--
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
	l.mu.Unlock()
	metrics.WebConnections(-1)
}

// open is how many connections are open (tests).
func (l *connCounter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

type limitedConn struct {
	net.Conn
	l    *connCounter
	key  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}
