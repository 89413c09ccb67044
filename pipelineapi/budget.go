package pipelineapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// Body bounds (doc/pipeline-api.md, Listener). Each endpoint reads at
// most its own bound; a body over FreeBody is read only within the body
// budgets, a smaller one needs none (the connection caps bound them:
// max_conns × FreeBody).
const (
	FreeBody   = 16 << 10
	takeBody   = 64 << 10
	reportBody = 256 << 10
	smallBody  = 4 << 10
)

// bodyBound is the largest body op accepts.
func bodyBound(op string) int64 {
	switch op {
	case "update":
		return wire.MaxBody
	case "report":
		return reportBody
	case "take":
		return takeBody
	}
	return smallBody
}

// addrClass is the unit a remote address is counted by: an IPv4 address
// itself, an IPv6 address by its /64 (one host usually holds a whole
// /64, so counting exact addresses would give it 2^64 of them).
func addrClass(host string) string {
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// bodyBudget bounds the bytes of request bodies held at once while they
// are read and checked: in total, per address class and per key name
// (the name the request claims; a stranger can name any registered key,
// so the per-key bound limits a key's share, not who spends it). A bound
// <= 0 is off.
type bodyBudget struct {
	total, perAddr, perKey int64

	mu     sync.Mutex
	used   int64
	byAddr map[string]int64
	byKey  map[string]int64
}

func newBodyBudget(total, perAddr, perKey int64) *bodyBudget {
	return &bodyBudget{total: total, perAddr: perAddr, perKey: perKey, byAddr: map[string]int64{}, byKey: map[string]int64{}}
}

// reserve takes n bytes for one body from addr's and key's shares; on
// success release gives them back (once); otherwise which names the
// bound that refused ("body_budget", "body_budget_per_addr",
// "body_budget_per_key").
func (b *bodyBudget) reserve(addr, key string, n int64) (release func(), which string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.total > 0 && b.used+n > b.total:
		return nil, "body_budget"
	case b.perAddr > 0 && b.byAddr[addr]+n > b.perAddr:
		return nil, "body_budget_per_addr"
	case b.perKey > 0 && b.byKey[key]+n > b.perKey:
		return nil, "body_budget_per_key"
	}
	b.used += n
	metrics.APIBodyBytes(n)
	b.byAddr[addr] += n
	b.byKey[key] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			metrics.APIBodyBytes(-n)
			if b.byAddr[addr] -= n; b.byAddr[addr] <= 0 {
				delete(b.byAddr, addr)
			}
			if b.byKey[key] -= n; b.byKey[key] <= 0 {
				delete(b.byKey, key)
			}
		})
	}, ""
}

// inUse is the bytes reserved now (for tests and the log).
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// readBody reads r's body within bound, holding a reservation of the
// bytes it may need: the announced Content-Length, or the bound when none
// is announced. It allocates the announced length once (no buffer that
// grows past it). A refusal leaves the body unread (the caller closes
// the connection).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, op, key string) ([]byte, func(), *refusal) {
	bound := bodyBound(op)
	if r.ContentLength > bound {
		return nil, nil, refuse(http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("Content-Length %d is over %d bytes, the most a %s accepts", r.ContentLength, bound, op))
	}
	want := r.ContentLength
	if want < 0 {
		want = bound
	}
	release := func() {}
	if want > FreeBody {
		rel, which := s.budget.reserve(addrClass(remoteIP(r.RemoteAddr)), key, want)
		if rel == nil {
			return nil, nil, &refusal{status: http.StatusServiceUnavailable, code: "body_budget", metric: which, retryAfter: 1,
				reason: fmt.Sprintf("the node holds too many request bodies (%s); retry", which)}
		}
		release = rel
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = readUpTo(r.Body, bound)
	}
	if err != nil {
		release()
		if errors.Is(err, errTooLarge) {
			return nil, nil, refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", bound))
		}
		return nil, nil, &refusal{status: http.StatusBadRequest, code: "bad_request", reason: "reading the body: " + err.Error(), metric: "body_unread"}
	}
	return body, release, nil
}

var errTooLarge = errors.New("body too large")

// readUpTo reads a body of unknown length, at most bound bytes, growing
// its buffer by doubling up to bound.
func readUpTo(rd io.Reader, bound int64) ([]byte, error) {
	buf := make([]byte, 0, min(bound+1, 4<<10))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > bound {
				return nil, errTooLarge
			}
			nb := make([]byte, len(buf), min(2*cap(buf), int(bound)+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > bound {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func remoteIP(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
