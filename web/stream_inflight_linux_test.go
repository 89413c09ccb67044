//go:build linux

package web

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/record"
)

// unreadBytes is what the kernels hold of the bytes the node wrote to a
// client: in the node's socket, not sent or not acknowledged
// (tcpi_notsent_bytes, tcpi_bytes_sent - tcpi_bytes_acked; no
// retransmissions on loopback), and in the client's socket, received and
// not read (SIOCINQ).
func unreadBytes(t *testing.T, server, client net.Conn) int {
	t.Helper()
	fdOf := func(c net.Conn, f func(fd int)) {
		raw, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		raw.Control(func(fd uintptr) { f(int(fd)) })
	}
	var n int
	fdOf(server, func(fd int) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		n += int(info.Notsent_bytes) + int(info.Bytes_sent-info.Bytes_acked)
	})
	fdOf(client, func(fd int) {
		q, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		n += q
	})
	return n
}

// TestStreamUnreadBytesBounded: a client (of
// either protocol) that stops reading is sent at most about
// HubOptions.InflightBytes(Upstream); the
// rest stays in its queue, where it is shed (by age, or here by the
// queue's bounds) and counted, instead of piling up in the kernels' socket
// buffers (megabytes per client before), where no latency budget applies.
// The test waits until the writer stops taking frames (it is held, or
// blocked in the kernel) and checks the bytes, not the time.
func TestStreamUnreadBytesBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		t.Run("upstream", func(t *testing.T) { testUnreadBytesBounded(t, b, false) })
		t.Run("v2", func(t *testing.T) { testUnreadBytesBounded(t, b, true) })
	})
}

func testUnreadBytesBounded(t *testing.T, b *redistest.Backend, v2 bool) {
	{
		r := newStreamRig(t, b, HubOptions{MaxAge: -1}, true)
		var conn *websocket.Conn
		bound := DefaultInflightBytesUpstream
		if v2 {
			conn, bound = r.dialV2(t, ""), DefaultInflightBytes
		} else {
			conn = r.dial(t, r.main.URL, "", "")
		}
		var taken atomic.Int64 // frames the writer took
		count := func(*client) { taken.Add(1) }
		r.hub.beforeWrite.Store(&count)
		var c *client
		r.hub.mu.Lock()
		for k := range r.hub.clients {
			c = k
		}
		r.hub.mu.Unlock()
		job := &record.Job{Ident: "slowreader", Fields: map[string]string{"url": "http://slow.example/"}}
		// 1,000 entries of 16 KB that do not compress: 16 MB, four
		// times what the kernel's send buffer grows to.
		rnd := make([]byte, 8<<10)
		for i := range 1000 {
			rand.Read(rnd)
			doc := fmt.Sprintf(`{"type":"stdout","message":"%s"}`, hex.EncodeToString(rnd))
			r.hub.StreamLog(job, []record.LogEntry{{Doc: doc, Kind: record.EntryObject, Type: "stdout", Score: float64(i + 1)}})
			r.hub.Flush()
		}
		// Settle: the writer has taken no frame for a while (a settling
		// wait, not an assertion).
		last, still := taken.Load(), 0
		for deadline := time.Now().Add(60 * time.Second); still < 10; {
			time.Sleep(20 * time.Millisecond)
			if n := taken.Load(); n != last {
				last, still = n, 0
			} else {
				still++
			}
			if time.Now().After(deadline) {
				t.Fatal("the writer never settled")
			}
		}
		limit := bound + 64<<10 + 40<<10 // a gathered batch, one frame
		if n := unreadBytes(t, c.bc.Conn, conn.NetConn()); n > limit {
			t.Errorf("%d bytes sent to a client that read none (%d frames taken); want at most %d: the rest must wait in the queue, where it is shed and counted",
				n, taken.Load(), limit)
		}
		c.mu.Lock()
		queued, dropped := c.bytes, c.dropped
		c.mu.Unlock()
		if dropped == 0 {
			t.Errorf("no entry counted as dropped (%d bytes queued)", queued)
		}
		t.Logf("frames taken by the writer %d, unread bytes %d, queued %d, dropped %d", taken.Load(),
			unreadBytes(t, c.bc.Conn, conn.NetConn()), queued, dropped)
	}
}
