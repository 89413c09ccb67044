package irc

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/store"
)

// Fuzz targets for the path this package owns: a raw server line →
// channel state → bot.Request → the bot's command and option parsers →
// reply lines on the wire. Seeds live in testdata/fuzz/<target>/; run e.g.
//
//	go test ./bot/irc -run '^$' -fuzz FuzzServerLine -fuzztime 1m

// wireChecker is a bot.Replier that renders answers exactly as the
// client does and checks every line it would write.
type wireChecker struct {
	t      *testing.T
	req    bot.Request
	nick   int
	nLines int
}

func (w *wireChecker) Reply(text string) {
	target, prefix := w.req.Channel, w.req.Nick+": "
	if w.req.Private() {
		target, prefix = w.req.Nick, ""
	}
	w.check(target, prefix, text)
}

func (w *wireChecker) Private(text string) { w.check(w.req.Nick, "", text) }

func (w *wireChecker) check(target, prefix, text string) {
	w.t.Helper()
	lines, err := messageLines("PRIVMSG", target, prefix, text, w.nick)
	if err != nil {
		w.t.Fatalf("reply to %q cannot be sent: %v", target, err)
	}
	checkLines(w.t, lines, target, w.nick)
	w.nLines += len(lines)
}

// checkLines asserts the wire invariants: one line each, CRLF only at the
// end, no NUL, at most 512 bytes even after the server adds its prefix.
func checkLines(t *testing.T, lines [][]byte, target string, nickLen int) {
	t.Helper()
	for _, l := range lines {
		if !bytes.HasSuffix(l, []byte("\r\n")) {
			t.Fatalf("line without CRLF: %q", l)
		}
		body := l[:len(l)-2]
		if bytes.ContainsAny(body, "\r\n\x00") {
			t.Fatalf("line carries CR, LF or NUL: %q", l)
		}
		if relayPrefixLen(nickLen)+len(l) > maxLineLen {
			t.Fatalf("relayed line would be %d bytes: %q", relayPrefixLen(nickLen)+len(l), l)
		}
		m, err := ircmsg.ParseLine(string(l))
		if err != nil || m.Command != "PRIVMSG" || len(m.Params) != 2 || m.Params[0] != target {
			t.Fatalf("line %q does not parse back as one PRIVMSG to %q: %v %q", l, target, err, m.Params)
		}
		if !utf8.ValidString(m.Params[1]) {
			t.Fatalf("line is not UTF-8: %q", l)
		}
	}
}

// fuzzClient is a Client with a bot on miniredis and no connection. It
// logs nowhere: *F methods may not be called while fuzzing.
func fuzzClient(f *testing.F) *Client {
	m := miniredis.RunT(f)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	f.Cleanup(func() { rdb.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := bot.New(store.New(rdb), bot.Options{Logger: quiet})
	return New(testIRCConfig("irc://127.0.0.1:1", "#chan"), b, quiet)
}

// preamble puts the bot in #chan with an op, a voiced and a plain user.
var preamble = []string{
	":srv 001 ArchiveBot :Welcome",
	":srv 005 ArchiveBot PREFIX=(qaohv)~&@%+ CHANTYPES=#& CHANMODES=beI,k,l,imnpst CASEMAPPING=rfc1459 :are supported",
	":ArchiveBot!u@h JOIN #chan",
	":srv 353 ArchiveBot = #chan :@op +voice %half plain ArchiveBot",
	":srv 366 ArchiveBot #chan :End of NAMES",
}

func FuzzServerLine(f *testing.F) {
	for _, s := range []string{
		":op!u@h PRIVMSG #chan :!status",
		":plain!u@h PRIVMSG #chan :!a https://example.com/",
		":voice!u@h PRIVMSG #chan :!a https://example.com/ --ignore-sets=blogs,forums --delay=100",
		":op!u@h PRIVMSG ArchiveBot :!pending",
		":half!u@h PRIVMSG #chan :!ao < https://example.com/list.txt --explain=\"a b\"",
		":op!u@h MODE #chan +vo-v plain plain voice",
		":op!u@h NICK op2",
		":op!u@h KICK #chan ArchiveBot :bye",
		":srv 353 ArchiveBot = #chan :~@+a &b",
		"@time=2024-01-01T00:00:00Z :op!u@h PRIVMSG #chan :!whereis abc123",
		":irc.example.net PRIVMSG #chan :!status",
		":op!u@h PRIVMSG @#chan :!status",
		":op!u@h PRIVMSG #chan :\x01ACTION !status\x01",
	} {
		f.Add(s)
	}
	c := fuzzClient(f)
	f.Fuzz(func(t *testing.T, line string) {
		c.state.reset("ArchiveBot")
		for _, l := range preamble {
			m, _ := ircmsg.ParseLine(l)
			c.state.handle(m)
		}
		msg, err := ircmsg.ParseLine(line)
		if err != nil {
			return
		}
		for _, ev := range c.state.handle(msg) {
			if ev.kind == evNone {
				t.Fatalf("empty event from %q", line)
			}
		}
		for _, ch := range c.state.JoinedChannels() {
			for _, n := range []string{"op", "voice", "plain", msg.Nick()} {
				if r := c.state.Rank(ch, n); r < bot.RankNone || r > bot.RankOp {
					t.Fatalf("rank %v", r)
				}
			}
		}
		if msg.Command != "PRIVMSG" {
			return
		}
		req, ok := c.request(msg)
		if !ok {
			return
		}
		if req.Nick == "" || strings.ContainsAny(req.Nick, " \r\n\x00") || req.Text != msg.Params[1] || !c.bot.IsCommand(req.Text) {
			t.Fatalf("bad request %+v from %q", req, line)
		}
		if req.Channel != "" && (req.Channel != msg.Params[0] || !c.state.IsChannel(req.Channel)) {
			t.Fatalf("request channel %q from %q", req.Channel, line)
		}
		if req.Private() && c.state.Fold(msg.Params[0]) != c.state.Fold(c.state.Me()) {
			t.Fatalf("private request sent to %q", msg.Params[0])
		}
		if !validTarget(req.Nick) || (req.Channel != "" && !validTarget(req.Channel)) {
			return // the server would not deliver this; nothing to answer
		}
		c.bot.Handle(context.Background(), req, &wireChecker{t: t, req: req, nick: c.nickLen()})
	})
}

// FuzzCommandText types arbitrary text into the channel and in private
// as users of every rank: the bot's command and option parsers must
// answer with well-formed lines and never crash.
func FuzzCommandText(f *testing.F) {
	for _, s := range []string{
		"!a https://example.com/",
		"!a https://example.com/ --ignore-sets=blogs,forums --no-offsite-links --user-agent-alias=firefox",
		"!a https://example.com/ --pipeline=x --large",
		"!ao https://example.com/ --explain='quoted \"text\"' --delay=0 --concurrency=99",
		"!a < https://example.com/list.txt",
		"!status https://example.com/",
		"!status abc",
		"!whereis abc",
		"!pending",
		"!help a",
		"!a http:///nohost",
		"!a https://例え.テスト/パス?q=%zz#frag#2",
		"!a https://example.com/ --delay",
		"!a https://example.com/ --delay=1 --delay=2",
		"!a https://example.com/ 'unterminated",
		"!ig abc (?!lookahead)",
		"!d abc 100 50",
		"!con abc 0",
	} {
		f.Add(s, uint8(0), false)
	}
	c := fuzzClient(f)
	f.Fuzz(func(t *testing.T, text string, rank uint8, private bool) {
		if !c.bot.IsCommand(text) || strings.ContainsAny(text, "\r\n\x00") {
			return // not a command, or not something IRC can carry
		}
		req := bot.Request{Nick: "fuzzer", Channel: "#chan", Rank: bot.Rank(rank % 3), Text: text}
		if private {
			req.Channel = ""
		}
		w := &wireChecker{t: t, req: req, nick: 30}
		c.bot.Handle(context.Background(), req, w)
	})
}

// FuzzMessageLines: any text for any valid target becomes well-formed
// lines that reassemble to the cleaned text (or say they were shortened).
func FuzzMessageLines(f *testing.F) {
	f.Add("#chan", "nick: ", "hello", 30)
	f.Add("nick", "", "a\r\nPRIVMSG #chan :x\x00", 9)
	f.Add("#c", "n: ", strings.Repeat("日本語 ", 400), 64)
	f.Add("#c", "", "\xff\xfe\xfd", 0)
	f.Fuzz(func(t *testing.T, target, prefix, text string, nickLen int) {
		if !validTarget(target) || len(target) > 200 || len(prefix) > 60 || nickLen < 0 || nickLen > 64 {
			return
		}
		lines, err := messageLines("PRIVMSG", target, prefix, text, nickLen)
		if err != nil {
			return
		}
		checkLines(t, lines, target, nickLen)
		p := cleanText(prefix)
		var got strings.Builder
		for _, l := range lines {
			m, _ := ircmsg.ParseLine(string(l))
			if !strings.HasPrefix(m.Params[1], p) {
				t.Fatalf("line without prefix %q: %q", p, l)
			}
			got.WriteString(strings.TrimPrefix(m.Params[1], p))
		}
		want := cleanText(text)
		if len(lines) == maxReplyLines && strings.Contains(got.String(), "answer shortened") {
			return
		}
		if got.String() != want {
			t.Fatalf("reassembled %q, want %q", got.String(), want)
		}
	})
}
