package irc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/news"
)

const (
	refuseOp      = "only channel operators may"
	refuseVoice   = "only channel operators or voiced users may"
	refusePrivate = "use it in a channel"
)

// eachServer runs f as a parallel subtest on each server of
// irctest.Servers: ngircd, and InspIRCd linked to Atheme.
func eachServer(t *testing.T, f func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range irctest.Servers {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}

// channelWithRoles starts the server of kind and the bot in #test with an
// op (first to join, so the server makes them +o), a voiced user and a
// plain user. The three connect at once (InspIRCd takes a second to
// register each client).
func channelWithRoles(t *testing.T, kind string) (n irctest.Server, h *harness, op, voice, plain *irctest.User) {
	t.Helper()
	n = irctest.StartServer(t, kind)
	us := irctest.DialAll(t, n.Addr(), "opal", "vera", "paul")
	op, voice, plain = us[0], us[1], us[2]
	op.Join("#test")
	voice.Join("#test")
	plain.Join("#test")

	op.Send("MODE #test +v vera")
	voice.Expect("+v", isMode("#test", "+v", "vera"))
	op.Mark()
	h = startBot(t, testIRCConfig(n.URL(), "#test"), nil)
	op.WaitBotIn("ArchiveBot", "#test")
	voice.Mark()
	plain.Mark()
	return n, h, op, voice, plain
}

func isMode(channel, modes string, args ...string) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		if m.Command != "MODE" || len(m.Params) < 2 || !strings.EqualFold(m.Params[0], channel) || m.Params[1] != modes {
			return false
		}
		return strings.Join(m.Params[2:], " ") == strings.Join(args, " ")
	}
}

func TestRolesRunCommands(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		_, h, op, voice, plain := channelWithRoles(t, kind)
		ctx := context.Background()
		ask := func(u *irctest.User, channel, text string) string {
			t.Helper()
			return strings.Join(u.Ask("ArchiveBot", channel, text), "\n")
		}

		if r := ask(op, "#test", "!a https://example.com/by-op"); !strings.HasPrefix(r, "Queued https://example.com/by-op") {
			t.Errorf("op !a: got %q", r)
		}
		if r := ask(voice, "#test", "!a https://example.com/by-voice"); !strings.HasPrefix(r, "Queued https://example.com/by-voice") {
			t.Errorf("voice !a: got %q", r)
		}
		if r := ask(plain, "#test", "!a https://example.com/by-plain"); !strings.Contains(r, refuseVoice) {
			t.Errorf("plain !a: got %q", r)
		}
		if r := ask(plain, "#test", "!ao https://example.com/by-plain"); !strings.HasPrefix(r, "Queued https://example.com/by-plain for archival without recursion") {
			t.Errorf("plain !ao: got %q", r)
		}
		for _, u := range []*irctest.User{op, voice, plain} {
			if r := ask(u, "#test", "!status"); !strings.Contains(r, "2 pending, 1 pending-ao") {
				t.Errorf("%s !status: got %q", u.Nick, r)
			}
		}
		// !pending answers in private, even when asked in the channel.
		plain.Mark()
		before := plain.Pos()
		pending := plain.Ask("ArchiveBot", "#test", "!pending")
		if len(pending) == 0 || !strings.Contains(pending[0], "3 pending jobs") {
			t.Errorf("!pending: got %q", pending)
		}
		for _, u := range []string{"by-op", "by-voice", "by-plain"} {
			if !strings.Contains(strings.Join(pending, "\n"), u) {
				t.Errorf("!pending does not list %s: %q", u, pending)
			}
		}
		after := plain.Pos()
		plain.SetPos(before)
		plain.Expect("!pending answer in private", func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "paul") && strings.Contains(m.Params[1], "3 pending jobs")
		})
		plain.SetPos(after)

		// The jobs carry who queued them and where.
		ids, err := h.rdb.LRange(ctx, "pending", 0, -1).Result()
		if err != nil || len(ids) != 2 {
			t.Fatalf("pending = %v, %v", ids, err)
		}
		byVoice, _ := h.rdb.HGetAll(ctx, ids[0]).Result() // LPUSH: newest first
		if byVoice["started_by"] != "vera" || byVoice["started_in"] != "#test" {
			t.Errorf("job of vera: started_by=%q started_in=%q", byVoice["started_by"], byVoice["started_in"])
		}

		// In private: read-only commands answer there, state-changing ones
		// are refused with a reason.
		if r := ask(plain, "", "!status"); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("private !status: got %q", r)
		}
		if r := ask(op, "", "!a https://example.com/private"); !strings.Contains(r, refusePrivate) {
			t.Errorf("private !a: got %q", r)
		}
		// Ordinary chat, even starting with "!", gets no answer.
		if r := ask(plain, "#test", "!wow that was fast"); r != "" {
			t.Errorf("chat got an answer: %q", r)
		}

		// Shutdown: Run returns after a clean QUIT.
		h.stop()
		m := op.Expect("QUIT", func(m ircmsg.Message) bool { return m.Command == "QUIT" && m.Nick() == "ArchiveBot" })
		if len(m.Params) == 0 || !strings.Contains(m.Params[0], "ArchiveBot shutting down") {
			t.Errorf("QUIT %q", m.Params)
		}
		if h.client.Connected() {
			t.Error("Connected() after Run returned")
		}
	})
}

// TestAuthorizationMatrix runs every command of the bot's table as op,
// voiced and plain user, in the channel and in private, and checks the
// outcome against the table's Perm and Mutates.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		_, h, op, voice, plain := channelWithRoles(t, kind)
		ranks := []struct {
			u    *irctest.User
			rank bot.Rank
		}{{op, bot.RankOp}, {voice, bot.RankVoice}, {plain, bot.RankNone}}
		cmds := h.bot.Commands()
		if len(cmds) == 0 {
			t.Fatal("empty command table")
		}
		checked := 0
		for _, cmd := range cmds {
			for _, r := range ranks {
				for _, private := range []bool{false, true} {
					text := invocation(cmd, fmt.Sprintf("%s-%v", r.u.Nick, private))
					channel := "#test"
					if private {
						channel = ""
					}
					got := strings.Join(r.u.Ask("ArchiveBot", channel, text), "\n")
					want := "allowed"
					switch {
					case private && cmd.Mutates:
						want = refusePrivate
					case !private && r.rank < cmd.Perm && cmd.Perm == bot.Op:
						want = refuseOp
					case !private && r.rank < cmd.Perm:
						want = refuseVoice
					}
					if outcome := classify(got); outcome != want {
						t.Errorf("%s as %s (private=%v): want %s, got %s: %q", text, r.u.Nick, private, want, outcome, got)
					}
					checked++
				}
			}
		}
		t.Logf("checked %d command × rank × place combinations", checked)
	})
}

// invocation builds a syntactically plausible call of cmd: permission is
// judged before arguments, but a well-formed call shows the allowed case
// reaching its handler.
func invocation(cmd *bot.Command, tag string) string {
	args := []string{}
	for i := 0; i < cmd.MinArgs; i++ {
		switch {
		case i == 0 && cmd.Ident:
			args = append(args, "abcdef0123456789")
		case i == 0:
			args = append(args, "https://example.org/matrix/"+tag+strings.NewReplacer("!", "", " ", "", "<", "list").Replace(cmd.Name))
		default:
			args = append(args, "1")
		}
	}
	return strings.TrimSpace(cmd.Name + " " + strings.Join(args, " "))
}

func classify(reply string) string {
	for _, r := range []string{refuseVoice, refuseOp, refusePrivate} {
		if strings.Contains(reply, r) {
			return r
		}
	}
	return "allowed"
}

// TestRankChanges: devoice, nick change, part and rejoin, halfop and
// several modes in one line are all reflected before the next command.
func TestRankChanges(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		_, _, op, voice, plain := channelWithRoles(t, kind)
		ask := func(u *irctest.User, text string) string {
			t.Helper()
			return strings.Join(u.Ask("ArchiveBot", "#test", text), "\n")
		}
		// wantClass checks that u's command is answered as allowed or with
		// the refusal class; what names the case.
		wantClass := func(u *irctest.User, text, class, what string) {
			t.Helper()
			if r := ask(u, text); classify(r) != class {
				t.Errorf("%s: %q, want %s", what, r, class)
			}
		}
		if r := ask(voice, "!a https://example.com/1"); classify(r) != "allowed" {
			t.Fatalf("voiced !a: %q", r)
		}
		op.Send("MODE #test -v vera")
		voice.Expect("-v", isMode("#test", "-v", "vera"))
		wantClass(voice, "!a https://example.com/2", refuseVoice, "devoiced !a")

		// Several modes in one line, with a non-prefix mode taking a
		// parameter in between.
		op.Send("MODE #test +vlv vera 50 paul")
		voice.Expect("+vlv", isMode("#test", "+vlv", "vera", "50", "paul"))
		wantClass(voice, "!a https://example.com/3", "allowed", "revoiced !a")
		wantClass(plain, "!a https://example.com/4", "allowed", "voiced paul !a")

		// A nick change keeps the rank.
		voice.Send("NICK vera2")
		voice.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "vera" })
		voice.Nick = "vera2"
		wantClass(voice, "!a https://example.com/5", "allowed", "renamed voiced !a")
		op.Send("NICK opal2")
		op.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "opal" })
		op.Nick = "opal2"
		wantClass(op, "!a < https://example.com/list.txt", "allowed", "renamed op !a <")
		// The old nick does not keep it: someone else taking it is plain.
		other := irctest.Dial(t, op.Conn().RemoteAddr().String(), "opal")
		other.Join("#test")
		wantClass(other, "!a https://example.com/6", refuseVoice, "new user with the op's old nick")

		// Part and rejoin: the voice is gone.
		plain.Send("PART #test")
		plain.Expect("own PART", func(m ircmsg.Message) bool { return m.Command == "PART" && m.Nick() == "paul" })
		plain.Join("#test")
		wantClass(plain, "!a https://example.com/7", refuseVoice, "paul after rejoin")

		// Halfop (%) counts as voice; -o leaves a user who was +ov voiced
		// (the bot asks NAMES again when multi-prefix is not available).
		op.Send("MODE #test +h paul")
		plain.Expect("+h", isMode("#test", "+h", "paul"))
		wantClass(plain, "!a https://example.com/8", "allowed", "halfop !a")
		wantClass(plain, "!a < https://example.com/8.txt", refuseOp, "halfop !a <")
		op.Send("MODE #test +o vera2")
		voice.Expect("+o", isMode("#test", "+o", "vera2"))
		wantClass(voice, "!a < https://example.com/9.txt", "allowed", "op'd vera2 !a <")
		op.Send("MODE #test -o vera2")
		voice.Expect("-o", isMode("#test", "-o", "vera2"))
		wantClass(voice, "!a < https://example.com/10.txt", refuseOp, "de-op'd vera2 !a <")
		wantClass(voice, "!a https://example.com/10", "allowed", "de-op'd but voiced vera2 !a")
	})
}

// TestKickAndNick: the bot rejoins after a KICK; it takes an alternate
// nick when its own is in use and reclaims it when it is free.
func TestKickAndNick(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		n := irctest.StartServer(t, kind)
		us := irctest.DialAll(t, n.Addr(), "ArchiveBot", "opal")
		squatter, op := us[0], us[1]
		op.Join("#test")
		h := startBot(t, testIRCConfig(n.URL(), "#test"), func(c *Client) { c.reclaimEvery = time.Hour })
		m := op.Expect("bot JOIN under an alternate nick", func(m ircmsg.Message) bool {
			return m.Command == "JOIN" && strings.HasPrefix(m.Nick(), "ArchiveBot_")
		})
		alt := m.Nick()
		op.Say("#test", "!status")
		if r := op.Reply(alt, "#test"); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("!status to %s: %q", alt, r)
		}
		// The squatter joins and leaves: the bot sees the QUIT and takes its
		// nick back at once (the periodic attempt is an hour away).
		squatter.Join("#test")
		squatter.Send("QUIT :bye")
		op.Expect("bot reclaiming its nick", func(m ircmsg.Message) bool {
			return m.Command == "NICK" && m.Nick() == alt && len(m.Params) > 0 && m.Params[0] == "ArchiveBot"
		})
		if r := strings.Join(op.Ask("ArchiveBot", "#test", "!status"), ""); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("!status after reclaiming the nick: %q", r)
		}
		if h.client.Nick() != "ArchiveBot" {
			t.Errorf("Nick() = %q", h.client.Nick())
		}

		op.Send("KICK #test ArchiveBot :out")
		op.Expect("KICK", func(m ircmsg.Message) bool { return m.Command == "KICK" })
		op.WaitBotIn("ArchiveBot", "#test")
		op.Say("#test", "!status")
		if r := op.Reply("ArchiveBot", "#test"); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("!status after rejoin: %q", r)
		}
	})
}

// TestRestartServer restarts ngircd under the bot: it reconnects, rejoins
// and answers again; while it is down Announce fails at once.
func TestRestartServer(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	// Production backoff, so the measured time is what operators get.
	h := startBot(t, testIRCConfig(n.URL(), "#test", "#other"), func(c *Client) {
		d := New(config.IRC{}, nil, nil)
		c.backoffMin, c.backoffMax = d.backoffMin, d.backoffMax
	})
	// answers has a new user join #test and checks the bot answers there.
	answers := func(when string) {
		t.Helper()
		u := irctest.Dial(t, n.Addr(), "rita")
		u.Join("#test")
		u.WaitBotPresent("ArchiveBot", "#test")
		u.Say("#test", "!status")
		if r := u.Reply("ArchiveBot", "#test"); !strings.HasPrefix(r, "Job status:") {
			t.Fatalf("!status%s: %q", when, r)
		}
	}
	h.waitState(true)
	answers("")

	stopped := time.Now()
	n.Stop()
	h.waitState(false)
	lost := time.Since(stopped)
	start := time.Now()
	err := h.client.Announce(context.Background(), "#test", "not now")
	if err == nil || time.Since(start) > 100*time.Millisecond {
		t.Errorf("Announce while disconnected: %v after %v; want an error at once", err, time.Since(start))
	}

	n.Start()
	restarted := time.Now()
	h.waitState(true)
	reconnected := time.Since(restarted)
	answers(" after restart")
	answering := time.Since(restarted)
	if err := h.client.Announce(context.Background(), "#other", "back again"); err != nil {
		t.Errorf("Announce after reconnect: %v", err)
	}
	t.Logf("ngircd restart: disconnect noticed after %v; reconnected %v after ngircd was back; rejoined and answering %v after", lost.Round(time.Millisecond), reconnected.Round(time.Millisecond), answering.Round(time.Millisecond))
}

// TestAnnounce: lines are posted; a channel that is not configured is
// never joined, its lines go to the report channel saying where they were
// meant to go (or, with none, cannot be delivered); a configured channel
// the bot cannot join is reported as such.
func TestAnnounce(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		n := irctest.StartServer(t, kind)
		op := irctest.Dial(t, n.Addr(), "opal")
		op.Join("#test")
		op.Join("#locked")
		op.Send("MODE #locked +k sesame")
		op.Expect("+k", isMode("#locked", "+k", "sesame"))
		op.Join("#elsewhere")
		op.Join("#keyed")
		op.Send("MODE #keyed +k opensesame")
		op.Expect("+k", isMode("#keyed", "+k", "opensesame"))
		h := startBot(t, testIRCConfig(n.URL(), "#test", "#keyed opensesame", "#locked"), nil)
		op.WaitBotIn("ArchiveBot", "#test")
		op.WaitBotPresent("ArchiveBot", "#keyed")
		ctx := context.Background()

		if err := h.client.Announce(ctx, "#test", "hello\r\nPRIVMSG #test :x\x00y"); err != nil {
			t.Fatalf("Announce: %v", err)
		}
		m := op.Expect("announcement", func(m ircmsg.Message) bool { return irctest.IsFrom(m, "ArchiveBot", "#test") })
		if want := "hello\uFFFD\uFFFDPRIVMSG #test :x\uFFFDy"; m.Params[1] != want {
			t.Errorf("announcement = %q, want %q", m.Params[1], want)
		}
		for _, c := range []struct{ channel, want string }{
			{"#elsewhere", "[for #elsewhere] over here"},
			{"#x\r\nQUIT", "[for #x\uFFFD\uFFFDQUIT] over here"},
			{"nochan", "[for nochan] over here"},
		} {
			if err := h.client.Announce(ctx, c.channel, "over here"); err != nil {
				t.Fatalf("Announce to %q: %v", c.channel, err)
			}
			m := op.Expect("report for "+c.channel, func(m ircmsg.Message) bool { return irctest.IsFrom(m, "ArchiveBot", "#test") })
			if m.Params[1] != c.want {
				t.Errorf("report for %q: %q, want %q", c.channel, m.Params[1], c.want)
			}
		}
		err := h.client.Announce(ctx, "#locked", "let me in")
		if !errors.Is(err, news.ErrCannotDeliver) {
			t.Errorf("Announce to a +k channel: %v, want ErrCannotDeliver", err)
		}
		if got := h.client.Channels(); strings.Join(got, ",") != "#test,#keyed,#locked" {
			t.Errorf("Channels() = %v", got)
		}
		op.Say("#test", "!status")
		if r := op.Reply("ArchiveBot", "#test"); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("still answering: %q", r)
		}
		if botJoined(op, "#elsewhere") {
			t.Error("the bot joined #elsewhere")
		}
		// With irc.report_channel off such lines cannot be delivered.
		h.client.report = ""
		if err := h.client.Announce(ctx, "#elsewhere", "x"); !errors.Is(err, news.ErrCannotDeliver) {
			t.Errorf("Announce to #elsewhere without a report channel: %v, want ErrCannotDeliver", err)
		}
	})
}

// TestForeignChannel: a report for a channel
// that is not configured goes to the report channel saying where it was
// meant to go; the bot never joins that channel, so its operators cannot
// command the bot from there.
func TestForeignChannel(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		n := irctest.StartServer(t, kind)
		us := irctest.DialAll(t, n.Addr(), "mallory", "watcher")
		mallory, watcher := us[0], us[1]
		mallory.Join("#victim") // first in: op there
		watcher.Join("#test")
		h := startBot(t, testIRCConfig(n.URL(), "#test"), nil)
		watcher.WaitBotIn("ArchiveBot", "#test")
		ctx := context.Background()
		h.rdb.HSet(ctx, "plantedjob", map[string]any{"url": "https://example.com/planted", "started_by": "x", "started_in": "#test"})
		h.rdb.LPush(ctx, "pending", "plantedjob")

		line := "mallory: Your job for https://example.com/x has finished. (abc)"
		if err := h.client.Announce(ctx, "#victim", line); err != nil {
			t.Fatalf("Announce for #victim: %v", err)
		}
		m := watcher.Expect("the report in #test", func(m ircmsg.Message) bool { return irctest.IsFrom(m, "ArchiveBot", "#test") })
		if want := "[for #victim] " + line; m.Params[1] != want {
			t.Errorf("report channel line %q, want %q", m.Params[1], want)
		}

		// #victim's op tries to command the bot from there.
		mallory.Say("#victim", "!a https://example.com/evil")
		mallory.Say("#victim", "!fail plantedjob")
		// A private command after them: the bot runs one user's commands in
		// order, so once it is answered the channel ones would have run.
		if r := mallory.Ask("ArchiveBot", "", "!status"); len(r) != 1 || !strings.HasPrefix(r[0], "Job status:") {
			t.Errorf("private answers: %q", r)
		}
		if got := h.rdb.LRange(ctx, "pending", 0, -1).Val(); strings.Join(got, ",") != "plantedjob" {
			t.Errorf("pending = %v: a command from #victim was obeyed", got)
		}
		if got := h.rdb.HGet(ctx, "plantedjob", "url").Val(); got == "" {
			t.Error("plantedjob was failed from #victim")
		}
		if botJoined(mallory, "#victim") {
			t.Error("the bot joined #victim")
		}
		for _, l := range botLinesTo(mallory, 0, "#victim") {
			t.Errorf("the bot posted in #victim: %q", l)
		}
		// Nor will it on a reconnect: only configured channels are wanted.
		h.client.mu.Lock()
		wanted := len(h.client.wanted)
		h.client.mu.Unlock()
		if wanted != 1 {
			t.Errorf("%d channels to rejoin after reconnects, want only #test", wanted)
		}
	})
}
