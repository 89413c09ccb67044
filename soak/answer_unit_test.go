package soak

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// TestNextCommandWaitsForTheWholeAnswer: a listing comes in private, in
// lines the bot's outbox paces; the user reads all of it before typing
// the next command, whose reply is then its own. Before, the next
// command's reply was the listing's tail (seed 3 at 8356de8: an !ao
// "answered" by " (2d0pdnsepg7keuc2n5d05hsjw) | 7. https://…").
// A stand-in bot on a real ngircd answers !pending with three private
// lines 400 ms apart and !ao in the channel.
func TestNextCommandWaitsForTheWholeAnswer(t *testing.T) {
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	bot := irctest.Dial(t, irc.Addr(), botNick+"_0")
	bot.Join(channel)
	user := irctest.Dial(t, irc.Addr(), "user9")
	user.Join(channel)
	user.WaitBotPresent(botNick+"_0", channel)
	go func() {
		for {
			m, err := bot.WaitWithin(time.Minute, "a command", func(m ircmsg.Message) bool {
				return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.HasPrefix(m.Params[1], "!")
			})
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(m.Params[1], "!pending"):
				bot.Say(m.Nick(), "pending (3):")
				time.Sleep(400 * time.Millisecond)
				bot.Say(m.Nick(), "1. https://soak.example/a (aaaa) | 2. https://soak.example/b")
				time.Sleep(400 * time.Millisecond)
				bot.Say(m.Nick(), " (bbbb) | 3. https://soak.example/c (cccc)")
			case strings.HasPrefix(m.Params[1], "!ao "):
				bot.Say(channel, m.Nick()+": Queued "+strings.TrimPrefix(m.Params[1], "!ao ")+".")
			}
		}
	}()
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s := &soak{t: t, rec: rec}
	if r, ok := s.command(user, "!pending"); !ok || r != "pending (3):" {
		t.Fatalf("!pending answered %q (%v)", r, ok)
	}
	if r, ok := s.command(user, "!ao https://soak.example/d"); !ok || r != "Queued https://soak.example/d." {
		t.Fatalf("the !ao after a listing was answered %q (%v): the listing's tail taken for its reply", r, ok)
	}
}
