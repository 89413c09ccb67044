package irc

import (
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
)

// TestTracker feeds server lines and checks the ranks the tracker derives.
func TestTracker(t *testing.T) {
	type check struct {
		channel, nick string
		want          bot.Rank
	}
	tests := []struct {
		name   string
		lines  []string
		checks []check
	}{
		{
			name: "defaults without ISUPPORT",
			lines: []string{
				":srv 001 bot :Welcome",
				":bot!u@h JOIN #c",
				":srv 353 bot = #c :@op +voice plain bot",
				":srv 366 bot #c :End of NAMES",
			},
			checks: []check{{"#c", "op", bot.RankOp}, {"#c", "voice", bot.RankVoice}, {"#c", "plain", bot.RankNone}, {"#c", "nobody", bot.RankNone}, {"#x", "op", bot.RankNone}},
		},
		{
			name: "PREFIX with owner, admin, halfop; multi-prefix NAMES",
			lines: []string{
				":srv 001 bot :Welcome",
				":srv 005 bot PREFIX=(qaohv)~&@%+ CHANTYPES=#& CASEMAPPING=rfc1459 :are supported",
				":bot!u@h JOIN #c",
				":srv 353 bot = #c :~owner &admin @op %half +voice @+both plain!u@host bot",
				":srv 366 bot #c :End of NAMES",
			},
			checks: []check{
				{"#c", "owner", bot.RankOp}, {"#c", "admin", bot.RankOp}, {"#c", "op", bot.RankOp},
				{"#c", "half", bot.RankVoice}, {"#c", "voice", bot.RankVoice}, {"#c", "both", bot.RankOp},
				{"#c", "plain", bot.RankNone}, {"#C", "OP", bot.RankOp},
			},
		},
		{
			name: "MODE with several changes and parameters of other modes",
			lines: []string{
				":srv 005 bot PREFIX=(ohv)@%+ CHANMODES=beI,k,l,imnpst :are supported",
				":bot!u@h JOIN #c",
				":srv 353 bot = #c :@op a b c d bot",
				":srv 366 bot #c :End of NAMES",
				":op!u@h MODE #c +vkbv-n a key *!*@spam b",
				":op!u@h MODE #c +lo 10 c",
				":op!u@h MODE #c +h d",
				":op!u@h MODE #c -o+v op op",
				":op!u@h MODE #c -l+v-v c c",
			},
			checks: []check{
				{"#c", "a", bot.RankVoice}, {"#c", "b", bot.RankVoice}, {"#c", "c", bot.RankOp},
				{"#c", "d", bot.RankVoice}, {"#c", "op", bot.RankVoice},
			},
		},
		{
			name: "NICK, PART, KICK, QUIT, JOIN",
			lines: []string{
				":bot!u@h JOIN #c",
				":bot!u@h JOIN #d",
				":srv 353 bot = #c :@op +v1 +v2 +v3 bot",
				":srv 366 bot #c :End of NAMES",
				":srv 353 bot = #d :@v1 bot",
				":srv 366 bot #d :End of NAMES",
				":op!u@h NICK op2",
				":v1!u@h PART #c :bye",
				":op2!u@h KICK #c v2 :out",
				":v3!u@h QUIT :gone",
				":v3!u@h JOIN #c",
				":v1!u@h JOIN #c",
			},
			checks: []check{
				{"#c", "op", bot.RankNone}, {"#c", "op2", bot.RankOp}, {"#c", "v1", bot.RankNone},
				{"#d", "v1", bot.RankOp}, {"#c", "v2", bot.RankNone}, {"#c", "v3", bot.RankNone},
			},
		},
		{
			name: "NAMES replaces what was known; our own KICK forgets the channel",
			lines: []string{
				":bot!u@h JOIN #c",
				":srv 353 bot = #c :@op bot",
				":srv 366 bot #c :End",
				":srv 353 bot = #c :op +bot",
				":srv 366 bot #c :End",
				":bot!u@h JOIN #k",
				":srv 353 bot = #k :@op bot",
				":srv 366 bot #k :End",
				":op!u@h KICK #k bot :out",
			},
			checks: []check{{"#c", "op", bot.RankNone}, {"#c", "bot", bot.RankVoice}, {"#k", "op", bot.RankNone}},
		},
		{
			name: "rfc1459 case mapping",
			lines: []string{
				":srv 005 bot CASEMAPPING=rfc1459 :are supported",
				":bot!u@h JOIN #c",
				":srv 353 bot = #c :@nick[1] bot",
				":srv 366 bot #c :End",
			},
			checks: []check{{"#c", "NICK{1}", bot.RankOp}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker("bot")
			for _, l := range tt.lines {
				tr.handle(parse(t, l))
			}
			for _, c := range tt.checks {
				if got := tr.Rank(c.channel, c.nick); got != c.want {
					t.Errorf("Rank(%s, %s) = %v, want %v", c.channel, c.nick, got, c.want)
				}
			}
		})
	}
}

func TestTrackerEvents(t *testing.T) {
	tr := newTracker("bot")
	evs := tr.handle(parse(t, ":bot!u@h JOIN #c"))
	if len(evs) != 1 || evs[0].kind != evSelfJoin {
		t.Errorf("own JOIN: %+v", evs)
	}
	if !tr.Joined("#C") {
		t.Error("not joined after own JOIN")
	}
	evs = tr.handle(parse(t, ":op!u@h KICK #c bot :out"))
	if len(evs) != 1 || evs[0].kind != evSelfKicked || evs[0].channel != "#c" {
		t.Errorf("own KICK: %+v", evs)
	}
	evs = tr.handle(parse(t, ":srv 475 bot #locked :Cannot join channel (+k)"))
	if len(evs) != 1 || evs[0].kind != evJoinFailed || evs[0].channel != "#locked" {
		t.Errorf("475: %+v", evs)
	}
	evs = tr.handle(parse(t, ":bot!u@h NICK bot2"))
	if len(evs) != 1 || evs[0].kind != evSelfNick || tr.Me() != "bot2" {
		t.Errorf("own NICK: %+v, me=%s", evs, tr.Me())
	}
	evs = tr.handle(parse(t, ":bot!u@h QUIT :x"))
	if len(evs) != 1 || evs[0].kind != evNickGone || evs[0].nick != "bot" {
		t.Errorf("QUIT of our old nick: %+v", evs)
	}
	tr.handle(parse(t, ":bot2!u@h JOIN #c"))
	tr.handle(parse(t, ":srv 353 bot2 = #c :@op +v bot2"))
	tr.handle(parse(t, ":srv 366 bot2 #c :End"))
	evs = tr.handle(parse(t, ":op!u@h MODE #c -o op"))
	if len(evs) != 1 || evs[0].kind != evNamesStale {
		t.Errorf("-o without multi-prefix should ask for NAMES again: %+v", evs)
	}
	tr.multiPrefix = true
	evs = tr.handle(parse(t, ":op!u@h MODE #c -v v"))
	if len(evs) != 0 {
		t.Errorf("-v with multi-prefix: %+v", evs)
	}
}

// TestFoldCase: each CASEMAPPING folds to its lower-case forms, and
// nothing becomes a byte outside ASCII ("~" under rfc1459 once did).
func TestFoldCase(t *testing.T) {
	for _, c := range []struct{ mapping, in, want string }{
		{"ascii", "Nick[A]^~", "nick[a]^~"},
		{"rfc1459", "Nick[A]\\^", "nick{a}|~"},
		{"rfc1459", "nick{a}|~", "nick{a}|~"},
		{"strict-rfc1459", "Nick[A]\\^~", "nick{a}|^~"},
	} {
		if got := foldCase(c.mapping, c.in); got != c.want {
			t.Errorf("foldCase(%q, %q) = %q, want %q", c.mapping, c.in, got, c.want)
		}
	}
}
