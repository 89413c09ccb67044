package testproc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartReadyLinesAndStop(t *testing.T) {
	sh := Bin(t, "sh")
	p := Start(t, "sh", sh, []string{"-c", "echo one; echo err >&2; echo ready now; exec sleep 30"},
		Options{Lines: 10, Ready: func(l string) bool { return strings.HasPrefix(l, "ready") }, Stop: syscall.SIGTERM})
	if got := <-p.Lines; got != "one" {
		t.Fatalf("first stdout line %q", got)
	}
	if got := <-p.Lines; got != "ready now" {
		t.Fatalf("second stdout line %q (stderr must not reach Lines)", got)
	}
	Eventually(t, "stderr in the output", func() bool { return strings.Contains(p.Output(), "err\n") })
	if !p.Running() || p.ExitCode() != -1 {
		t.Fatal("not running")
	}
	code, _ := p.Term(WaitFor)
	if code != -1 || p.State() == nil || p.Running() {
		t.Fatalf("after SIGTERM: code %d, state %v", code, p.State())
	}
	if _, ok := <-p.Lines; ok {
		t.Fatal("Lines not closed at exit")
	}
}

func TestStartStdinAndExitCode(t *testing.T) {
	p := Start(t, "cat", Bin(t, "sh"), []string{"-c", "cat; exit 3"}, Options{Stdin: true})
	p.Stdin.Write([]byte("hello\n"))
	p.Stdin.Close()
	select {
	case <-p.Exited():
	case <-time.After(WaitFor):
		t.Fatal("did not exit")
	}
	if p.ExitCode() != 3 || p.Output() != "hello\n" || p.Tail(1) != "hello" {
		t.Fatalf("exit %d, output %q", p.ExitCode(), p.Output())
	}
}

func TestEventuallyReturnsTheWait(t *testing.T) {
	start := time.Now()
	d := Eventually(t, "30 ms", func() bool { return time.Since(start) > 30*time.Millisecond })
	if d < 30*time.Millisecond || d > WaitFor {
		t.Fatalf("took %v", d)
	}
}

func TestFreeAddr(t *testing.T) {
	if a := FreeAddr(t); !strings.HasPrefix(a, "127.0.0.1:") || FreePort(t) <= 0 {
		t.Fatalf("addr %q", a)
	}
}

func TestBinMissingSkipsOutsideCI(t *testing.T) {
	if InCI() {
		t.Skip("in CI a missing program fails the test")
	}
	ran := false
	t.Run("missing", func(t *testing.T) {
		Bin(t, "no-such-program-archivebot", "/no/such/path")
		ran = true
	})
	if ran {
		t.Fatal("Bin returned for a missing program")
	}
}

func TestPythonMissingModuleSkipsOutsideCI(t *testing.T) {
	if InCI() {
		t.Skip("in CI a missing module fails the test")
	}
	ran := false
	t.Run("missing", func(t *testing.T) {
		Python(t, "no_such_module_archivebot")
		ran = true
	})
	if ran {
		t.Fatal("Python returned for a module it cannot import")
	}
}

// TestFreeze: Freeze returns only once the process is stopped, and
// SIGCONT lets it run on.
func TestFreeze(t *testing.T) {
	p := Start(t, "sleep", Bin(t, "sleep"), []string{"30"}, Options{})
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(b, ')'); i < 0 || b[i+2] != 'T' {
		t.Errorf("state after Freeze: %q", b)
	}
	p.Signal(syscall.SIGCONT)
	p.Kill()
}

// TestFreePortNeverRepeats: no two calls in a process return one port,
// though each port is free again as soon as it is returned. A kernel that
// hands out the port it just freed (as one did to the soak's node-a, its
// web API and stream on one port) is stood in for: it offers 41001
// twice, then 41002; with the record of ports handed out removed the
// second call returned 41001 again.
func TestFreePortNeverRepeats(t *testing.T) {
	offers := []int{41001, 41001, 41002}
	real := listenLocal
	t.Cleanup(func() { listenLocal = real })
	listenLocal = func() (net.Listener, error) {
		p := offers[0]
		offers = offers[1:]
		return fixedListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p}}, nil
	}
	if a, b := FreePort(t), FreePort(t); a == b {
		t.Fatalf("port %d returned twice", a)
	}
	listenLocal = real
	seen := map[int]bool{}
	for range 300 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
	}
}

// fixedListener is a listener that is only an address.
type fixedListener struct{ addr net.Addr }

func (l fixedListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fixedListener) Close() error              { return nil }
func (l fixedListener) Addr() net.Addr            { return l.addr }
