package embeddedredis

// What a client on the network can send must never take the node down
// (doc/reliability.md, "The embedded Redis under hostile input").

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
	"github.com/redis/go-redis/v9"
)

// rawExchange sends raw bytes on a new connection and returns what the
// server answers until it closes the connection or goes quiet.
func rawExchange(t testing.TB, addr, send string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, send); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var got strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String()
		}
	}
}

// stillServes checks that a client connected before the attack and a new
// one both still work.
func stillServes(t *testing.T, s *Server, before *redis.Client, password string) {
	t.Helper()
	for i, c := range []*redis.Client{before, client(t, s, password, 0)} {
		if err := c.Set(ctx, "alive", i, 0).Err(); err != nil {
			t.Fatalf("client %d after the attack: %v", i, err)
		}
		if v := c.Get(ctx, "alive").Val(); v != string(rune('0'+i)) {
			t.Fatalf("client %d after the attack: GET = %q", i, v)
		}
	}
}

// The reproduction: one line to the port, before any login, was a
// miniredis panic (makeslice: len out of range) that ended the process.
func TestHugeBulkLengthBeforeLogin(t *testing.T) {
	for _, pw := range []string{"", "secret"} {
		t.Run("password="+pw, func(t *testing.T) {
			s := start(t, Options{Password: pw, DataDir: t.TempDir()})
			before := client(t, s, pw, 0)
			if err := before.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for _, attack := range []string{
				"*1\r\n$9223372036854775805\r\n",
				"*1\r\n$-9223372036854775808\r\n",
				"*1\r\n$536870912\r\n",
				"*9223372036854775807\r\n",
				"*0\r\n*-1\r\n*1\r\n:1\r\n",
				"*1\r\n+PING\r\n",
				strings.Repeat("A", 100<<10), // a line with no end
				"PING\r\n",
			} {
				got := rawExchange(t, s.Addr(), attack)
				if !strings.HasPrefix(got, "-ERR Protocol error") {
					t.Errorf("%.40q: reply %q, want a protocol error", attack, got)
				}
			}
			stillServes(t, s, before, pw)
		})
	}
}

// Before AUTH the limits are Redis's for unauthenticated clients; AUTH lifts
// them for the next command, even when pipelined.
func TestPreAuthLimits(t *testing.T) {
	s := start(t, Options{Password: "pw", MaxBulkLen: 1 << 20})
	big := strings.Repeat("x", 100<<10)
	bulk := func(args ...string) string {
		var b strings.Builder
		b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
		for _, a := range args {
			b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
		}
		return b.String()
	}
	if got := rawExchange(t, s.Addr(), bulk("SET", "k", big)); !strings.Contains(got, "unauthenticated bulk length") {
		t.Errorf("big SET before AUTH: %q", got)
	}
	if got := rawExchange(t, s.Addr(), bulk(strings.Split("DEL a b c d e f g h i j k", " ")...)); !strings.Contains(got, "unauthenticated multibulk length") {
		t.Errorf("11 arguments before AUTH: %q", got)
	}
	got := rawExchange(t, s.Addr(), bulk("AUTH", "pw")+bulk("SET", "k", big)+bulk("STRLEN", "k"))
	if got != "+OK\r\n+OK\r\n:102400\r\n" {
		t.Errorf("pipelined AUTH then a big SET: %q", got)
	}
}

// The bulk limit: an argument of MaxBulkLen bytes passes, one more byte is
// refused before it is read; commands that build strings stay within it.
func TestBulkLimitAndStringBuilders(t *testing.T) {
	const limit = 1 << 20
	s := start(t, Options{MaxBulkLen: limit})
	c := client(t, s, "", 0)
	if err := c.Set(ctx, "max", strings.Repeat("x", limit), 0).Err(); err != nil {
		t.Fatalf("SET of exactly the limit: %v", err)
	}
	err := c.Set(ctx, "over", strings.Repeat("x", limit+1), 0).Err()
	if err == nil || !strings.Contains(err.Error(), "Protocol error: invalid bulk length") {
		t.Fatalf("SET over the limit: %v", err)
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"SETRANGE", "k", "9223372036854775000", "x"}, "string exceeds maximum allowed size"},
		{[]any{"SETRANGE", "k", limit, "x"}, "string exceeds maximum allowed size"},
		{[]any{"SETBIT", "k", "9223372036854775000", "1"}, "bit offset is not an integer or out of range"},
		{[]any{"SETBIT", "k", 8 * limit, "1"}, "bit offset is not an integer or out of range"},
		{[]any{"APPEND", "max", "y"}, "string exceeds maximum allowed size"},
		{[]any{"LPOS", "list", "a", "COUNT", "9223372036854775807"}, ""},
		{[]any{"SRANDMEMBER", "set", "-9223372036854775808"}, "value is out of range"},
		{[]any{"HRANDFIELD", "hash", "-9223372036854775808"}, "value is out of range"},
		{[]any{"ZRANDMEMBER", "zset", "-9223372036854775808"}, "value is out of range"},
	} {
		c.RPush(ctx, "list", "a")
		c.SAdd(ctx, "set", "a")
		c.HSet(ctx, "hash", "a", "1")
		c.ZAdd(ctx, "zset", redis.Z{Member: "a"})
		err := c.Do(ctx, tc.args...).Err()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if n := c.SetRange(ctx, "k", limit-1, "x").Val(); n != limit {
		t.Errorf("SETRANGE up to the limit: %d", n)
	}
	if n := c.StrLen(ctx, "max").Val(); n != limit {
		t.Errorf("the refused APPEND changed max: %d bytes", n)
	}
}

// The second reproduction, against the default limit, with a
// password: an authenticated SETRANGE at a huge offset.
func TestSetrangeHugeOffsetAuthenticated(t *testing.T) {
	s := start(t, Options{Password: "pw", DataDir: t.TempDir()})
	before := client(t, s, "pw", 0)
	attacker := client(t, s, "pw", 0)
	if err := before.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	err := attacker.Do(ctx, "SETRANGE", "k", "9223372036854775000", "x").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR string exceeds maximum allowed size") {
		t.Fatalf("SETRANGE: %v", err)
	}
	stillServes(t, s, before, "pw")
	if err := attacker.Ping(ctx).Err(); err != nil {
		t.Fatalf("the refused command's own connection: %v", err)
	}
}

// A command that panics inside miniredis closes its own connection only;
// the server's lock is released, the others go on, and it is counted.
func TestPanicClosesOnlyItsConnection(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	if err := s.srv.Register("TESTPANIC", func(*server.Peer, string, []string) { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	before := client(t, s, "", 0)
	if err := before.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got := rawExchange(t, s.Addr(), "*1\r\n$9\r\nTESTPANIC\r\n*1\r\n$4\r\nPING\r\n")
	if got != "-ERR internal error; closing the connection\r\n" {
		t.Errorf("reply %q", got)
	}
	// Inside a script the call runs with miniredis's lock held.
	err := before.Eval(ctx, "return redis.call('TESTPANIC')", nil).Err()
	if err == nil {
		t.Errorf("EVAL of a panicking call: no error")
	}
	stillServes(t, s, client(t, s, "", 0), "")
	if s.Panics() == 0 {
		t.Errorf("panics not counted")
	}
}

// Found by FuzzCommands: a script returning a function was a panic
// ("wat"), and one returning a table that contains itself recursed until
// the stack overflowed, which no recover catches. Redis answers nil.
func TestScriptRepliesOfAnyType(t *testing.T) {
	s := start(t, Options{})
	c := client(t, s, "", 0)
	if v, err := c.Eval(ctx, "return redis.call", nil).Result(); err != redis.Nil {
		t.Errorf("a function: %v, %v", v, err)
	}
	if err := c.Eval(ctx, "local t = {} t[1] = t return t", nil).Err(); err != nil {
		t.Errorf("a table that contains itself: %v", err)
	}
	if s.Panics() != 0 {
		t.Errorf("%d panics", s.Panics())
	}
	stillServes(t, s, c, "")
}
