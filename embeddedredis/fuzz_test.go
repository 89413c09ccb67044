package embeddedredis

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fuzzServers are shared by the fuzz inputs of one process: one with a
// password (what the network sees first) and one without, with a log, so
// that the inputs reach the commands and the write-ahead log.
var (
	fuzzOnce    sync.Once
	fuzzServers []*Server
)

// FuzzListener feeds raw bytes to the embedded Redis listener. Whatever a
// connection sends, the server must go on serving other clients, and no
// command may panic (a recovered panic still fails the input).
//
//	go test -run '^$' -fuzz FuzzListener -fuzztime 60s ./embeddedredis/
func FuzzListener(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$9223372036854775805\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$19\r\n9223372036854775000\r\n$1\r\nx\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$6\r\nAPPEND\r\n$1\r\nk\r\n",
		"*1\r\n$5\r\nMULTI\r\n*3\r\n$5\r\nLPUSH\r\n$1\r\nl\r\n$1\r\na\r\n*1\r\n$4\r\nEXEC\r\n",
		"*3\r\n$4\r\nEVAL\r\n$33\r\nreturn redis.call('INCR', KEYS[1])\r\n$1\r\n1\r\n",
		"*3\r\n$11\r\nSRANDMEMBER\r\n$1\r\ns\r\n$20\r\n-9223372036854775808\r\n",
		"*0\r\n*-1\r\nPING\r\n",
		"*2\r\n$6\r\nSELECT\r\n$2\r\n99\r\n",
	} {
		f.Add([]byte(seed))
	}
	startFuzzServers(f)
	f.Fuzz(func(t *testing.T, in []byte) { fuzzSend(t, in) })
}

// FuzzCommands is FuzzListener with well-formed requests, so that the
// inputs reach the commands: lines are arguments, empty lines end a
// command.
//
//	go test -run '^$' -fuzz FuzzCommands -fuzztime 60s ./embeddedredis/
func FuzzCommands(f *testing.F) {
	for _, seed := range []string{
		"SETRANGE\nk\n9223372036854775000\nx",
		"SET\nk\nv\n\nAPPEND\nk\nw\n\nSETBIT\nk\n99\n1\n\nGETRANGE\nk\n-5\n-1",
		"RPUSH\nl\na\nb\n\nLPOS\nl\na\nCOUNT\n0\nRANK\n-9223372036854775808",
		"SADD\ns\na\n\nSRANDMEMBER\ns\n-3\n\nSPOP\ns\n2",
		"HSET\nh\nf\nv\n\nHRANDFIELD\nh\n-2\nWITHVALUES",
		"ZADD\nz\n1\na\n\nZRANDMEMBER\nz\n-2\nWITHSCORES\n\nZRANGE\nz\n0\n-1\nREV",
		"MULTI\n\nINCR\nn\n\nEXPIRE\nn\n100\n\nEXEC",
		"EVAL\nreturn redis.call('SETRANGE', KEYS[1], ARGV[1], 'x')\n1\nk\n5",
		"SELECT\n3\n\nSET\nk\nv\nEX\n10\n\nSWAPDB\n0\n3",
		"XADD\ns\n*\nf\nv\n\nXRANGE\ns\n-\n+\nCOUNT\n2",
		"BITOP\nAND\nd\nk\nk2\n\nBITPOS\nk\n1\n0\n-1",
		"GEOADD\ng\n13.36\n38.11\np\n\nGEORADIUS\ng\n15\n37\n200\nkm\nCOUNT\n1",
	} {
		f.Add([]byte(seed))
	}
	startFuzzServers(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		var req strings.Builder
		for _, cmd := range strings.Split(string(in), "\n\n") {
			args := strings.Split(cmd, "\n")
			req.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
			for _, a := range args {
				req.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
			}
		}
		fuzzSend(t, []byte(req.String()))
	})
}

func startFuzzServers(f *testing.F) {
	fuzzOnce.Do(func() {
		for _, o := range []Options{{Password: "pw"}, {DataDir: f.TempDir()}} {
			o.Addr, o.Logger, o.MaxBulkLen = "127.0.0.1:0", quietLogger(), 1<<20
			s, err := Start(o)
			if err != nil {
				f.Fatal(err)
			}
			fuzzServers = append(fuzzServers, s)
		}
	})
}

// fuzzSend sends in on a connection to each fuzz server, reads what comes
// back, and checks that no command panicked and that the server answers a
// new client.
func fuzzSend(t *testing.T, in []byte) {
	for _, s := range fuzzServers {
		before := s.Panics()
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write(in)
		c.(*net.TCPConn).CloseWrite()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		c.Close()
		if n := s.Panics() - before; n != 0 {
			t.Fatalf("%d commands panicked", n)
		}
		// A new connection still gets an answer.
		got := rawExchange(t, s.Addr(), "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n")
		if !strings.HasPrefix(got, "+PONG") && !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("PING after the input: %q", got)
		}
	}
}
