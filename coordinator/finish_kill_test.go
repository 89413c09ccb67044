package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
)

// The SIGKILL test runs the finish notifier in a child process (this test
// binary, re-executed) that reports to a fake IRC server in the parent.
// A line counts as delivered when the server acknowledged it, which is
// when the child's Announce returns nil — "written to the IRC socket".
const (
	envKillChild = "ARCHIVEBOT_FINISH_CHILD_REDIS"
	envKillIRC   = "ARCHIVEBOT_FINISH_CHILD_IRC"
)

// ackAnnouncer sends each line to the fake IRC server and waits for its
// acknowledgement.
type ackAnnouncer struct {
	addr string
	conn net.Conn
	rd   *bufio.Reader
}

func (a *ackAnnouncer) Channels() []string { return []string{"#ab"} }

func (a *ackAnnouncer) Announce(ctx context.Context, channel, text string) error {
	if a.conn == nil {
		c, err := net.DialTimeout("tcp", a.addr, time.Second)
		if err != nil {
			return err
		}
		a.conn, a.rd = c, bufio.NewReader(c)
	}
	a.conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := fmt.Fprintf(a.conn, "%s %s\n", channel, text)
	if err == nil {
		var ack string
		ack, err = a.rd.ReadString('\n')
		if err == nil && ack != "ok\n" {
			err = fmt.Errorf("bad ack %q", ack)
		}
	}
	if err != nil {
		a.conn.Close()
		a.conn = nil
		return fmt.Errorf("IRC: %w", err)
	}
	return nil
}

// TestFinishNotifierChild is the child process; it does nothing in a
// normal run.
func TestFinishNotifierChild(t *testing.T) {
	url := os.Getenv(envKillChild)
	if url == "" {
		t.Skip("child process of TestFinishNotifierSIGKILL")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	f := NewFinishNotifier(store.NewStore(c), &ackAnnouncer{addr: os.Getenv(envKillIRC)}, FinishConfig{Batch: 1}, svcLog(t))
	for { // until killed
		f.runOnce(context.Background())
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeIRC acknowledges lines while up; while down it closes every
// connection at once. Every accepted connection and line is signalled.
type fakeIRC struct {
	ln      net.Listener
	mu      sync.Mutex
	up      bool
	upFor   int // when > 0, go down after this many more lines
	lines   []string
	events  chan string // "conn", "line"
	closing []net.Conn
}

func newFakeIRC(t *testing.T) *fakeIRC {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeIRC{ln: ln, events: make(chan string, 10000)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *fakeIRC) set(up bool, upFor int) {
	s.mu.Lock()
	s.up, s.upFor = up, upFor
	s.mu.Unlock()
}

func (s *fakeIRC) serve(c net.Conn) {
	defer c.Close()
	s.events <- "conn"
	rd := bufio.NewReader(c)
	for {
		s.mu.Lock()
		up := s.up
		s.mu.Unlock()
		if !up {
			return
		}
		l, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		s.mu.Lock()
		if !s.up { // went down while the line was in flight: not delivered
			s.mu.Unlock()
			return
		}
		s.lines = append(s.lines, strings.TrimSuffix(l, "\n"))
		if s.upFor > 0 {
			s.upFor--
			if s.upFor == 0 {
				s.up = false
			}
		}
		s.mu.Unlock()
		fmt.Fprint(c, "ok\n")
		s.events <- "line"
	}
}

// wait blocks until n events of kind arrived.
func (s *fakeIRC) wait(t *testing.T, kind string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for n > 0 {
		select {
		case e := <-s.events:
			if e == kind {
				n--
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %d more %q events", n, kind)
		}
	}
}

// child starts the notifier process.
func killChild(t *testing.T, b *redistest.Backend, irc *fakeIRC) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFinishNotifierChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKillChild+"="+b.URL, envKillIRC+"="+irc.ln.Addr().String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func sigkill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestFinishNotifierSIGKILL kills the notifier process (SIGKILL) while
// notices are pending and IRC is down, twice; after the restart every
// notice is delivered exactly once, in order.
func TestFinishNotifierSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var want []string
		for n := range 6 {
			url := fmt.Sprintf("http://kill%d.example.com/", n)
			b.Client.RPush(ctx, store.KeyFinishNotifications, svcNotice(url, "alice", "#ab", false))
			want = append(want, fmt.Sprintf("#ab alice: Your job for %s has finished. (%s)", url, ident.Of(url)))
		}
		irc := newFakeIRC(t)

		// 1. IRC down from the start: the child keeps failing; kill it.
		cmd := killChild(t, b, irc)
		irc.wait(t, "conn", 3)
		sigkill(t, cmd)

		// 2. IRC up for two lines, then down again; kill the child while it
		// retries.
		irc.set(true, 2)
		cmd = killChild(t, b, irc)
		irc.wait(t, "line", 2)
		irc.wait(t, "conn", 3)
		sigkill(t, cmd)
		lists := svcLists(t, b)
		if len(lists[0])+len(lists[1]) != 4 {
			t.Errorf("after the second kill Redis holds %v, want the 4 undelivered notices", lists)
		}

		// 3. IRC up for good: everything left is delivered, once.
		irc.set(true, 0)
		cmd = killChild(t, b, irc)
		irc.wait(t, "line", 4)
		// Wait for the last acknowledgement to reach Redis.
		for deadline := time.Now().Add(10 * time.Second); ; {
			l := svcLists(t, b)
			if len(l[0])+len(l[1]) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("notices still in Redis: %v", l)
			}
			time.Sleep(10 * time.Millisecond)
		}
		sigkill(t, cmd)
		irc.mu.Lock()
		got := append([]string{}, irc.lines...)
		irc.mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("delivered lines (-want +got):\n%s", diff)
		}
	})
}
