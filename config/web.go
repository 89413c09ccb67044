package config

import (
	"net"
	"time"
)

// Defaults of the web server and the live stream.
const (
	// DefaultStreamListen is upstream's WebSocket port, where its
	// dashboard looks for /stream.
	DefaultStreamListen = "127.0.0.1:4568"
	// DefaultRecentMaxBytes caps one /logs/recent answer.
	DefaultRecentMaxBytes = 4 << 20
	// DefaultStreamMaxLag: entries of one job the trimmer keeps for a
	// lagging live stream.
	DefaultStreamMaxLag = 10000
	// DefaultStreamQueueBytes and DefaultStreamTotalBytes bound what the
	// live stream queues for one client and for all clients together.
	DefaultStreamQueueBytes = 4 << 20
	DefaultStreamTotalBytes = 64 << 20
	// DefaultStreamUnreadBytes and DefaultStreamUnreadBytesUpstream bound
	// the bytes sent to one live-stream client (of our protocol, of
	// upstream's) that it has not read yet (doc/web.md, Backpressure).
	DefaultStreamUnreadBytes         = 256 << 10
	DefaultStreamUnreadBytesUpstream = 64 << 10
	// DefaultHTTPMaxConns and DefaultHTTPMaxConnsPerAddr cap the open
	// connections of the web and stream listeners together (doc/web.md,
	// Limits): an idle live-stream client costs about 2 goroutines and
	// tens of KiB (doc/benchmarks.md), so 1,024 stay well under 100 MB and
	// the process's descriptors; 64 from one address (an IPv6 /64) leave
	// room for a few browsers behind one NAT, each with its keep-alive
	// connections and one stream.
	DefaultHTTPMaxConns        = 1024
	DefaultHTTPMaxConnsPerAddr = 64
	// DefaultStreamMaxAge closes a live-stream connection this old (the
	// dashboard reconnects at once and resyncs), so a client that
	// answers every ping does not hold its place for ever.
	DefaultStreamMaxAge = 6 * time.Hour
)

// HTTP configures the web server (the JSON API, /metrics, /readyz).
type HTTP struct {
	// Listen is the address to serve on; default 127.0.0.1:4567
	// (upstream's port). Written as "" it switches the server off.
	Listen string `toml:"listen"`
	// StreamListen is a second address serving only the upstream-compatible
	// live stream (/stream), where upstream's dashboard looks for it;
	// default 127.0.0.1:4568. Written as "" it is off (the stream is still
	// on the main listener).
	StreamListen string `toml:"stream_listen"`
	// StreamMaxLag bounds how far the trimmer waits for the live stream:
	// when more than this many log entries of one job were analyzed but
	// not broadcast, it trims anyway and counts them as skipped. Default
	// 10000; 0 means no waiting for the stream at all.
	StreamMaxLag int `toml:"stream_max_lag"`
	// StreamQueueBytes and StreamTotalBytes bound the bytes the live
	// stream holds for one slow client and for all clients together
	// (defaults 4 MiB and 64 MiB); past them clients lose their oldest
	// log frames, counted (doc/web.md, Backpressure).
	StreamQueueBytes int64 `toml:"stream_queue_bytes"`
	StreamTotalBytes int64 `toml:"stream_total_bytes"`
	// StreamUnreadBytes and StreamUnreadBytesUpstream bound the bytes sent
	// to one client of our protocol (of upstream's) that it has not read
	// yet, as its pongs to progress pings tell (defaults 256 KiB and 64
	// KiB); a client past it is sent nothing more until it reads, and its
	// frames age in its queue, where the 1 s budget drops them, counted.
	// 0: no bound but the kernels' socket buffers.
	StreamUnreadBytes         int `toml:"stream_unread_bytes"`
	StreamUnreadBytesUpstream int `toml:"stream_unread_bytes_upstream"`
	// RecentMaxBytes caps one /logs/recent answer (default 4 MiB; written
	// as 0: no cap): past it each job keeps its newest entries.
	RecentMaxBytes int `toml:"recent_max_bytes"`
	// MaxConns and MaxConnsPerAddr cap the open connections of the web
	// and stream listeners together, in total and per remote address (an
	// IPv6 /64 counts as one); past either a connection is answered 503
	// at once, counted and logged (defaults 1024 and 64; written as 0: no
	// cap). Behind a reverse proxy every client shares its address: set
	// max_conns_per_addr = 0 there.
	MaxConns        int `toml:"max_conns"`
	MaxConnsPerAddr int `toml:"max_conns_per_addr"`
	// StreamMaxAge closes a live-stream connection that old with 1001
	// (going away; the dashboard reconnects). Default 6h; 0: no bound.
	StreamMaxAge Duration `toml:"stream_max_age"`
	// PublicURL is where people reach the dashboard (!login's links,
	// !pending's); "" (the default) switches dashboard sign-in off.
	PublicURL string `toml:"public_url"`
}

// StreamOn reports whether the node runs the live log stream: whenever it
// serves HTTP (listen = "" switches the second listener off too).
func (h HTTP) StreamOn() bool { return h.Listen != "" }

// checkListen resolves a listen address as net.Listen will: host:port, a
// port in 0–65535, a host that resolves.
func checkListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return err
	}
	if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
		return err
	}
	return nil
}
