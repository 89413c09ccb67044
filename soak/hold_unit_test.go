package soak

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// standInEnv names the IRC server TestStandInLeader connects to.
const standInEnv = "SOAK_STANDIN_IRC"

// TestStandInLeader is not a test of its own: TestFreezeLeaderHoldsACommand
// runs the test binary with it as the leader's process. It joins the
// channel as the bot and answers every !a in it with a refusal, as a
// node whose fence refused the registration does.
func TestStandInLeader(t *testing.T) {
	addr := os.Getenv(standInEnv)
	if addr == "" {
		t.Skip("run by TestFreezeLeaderHoldsACommand")
	}
	u := irctest.Dial(t, addr, botNick+"_0")
	u.Join(channel)
	for {
		m, err := u.WaitWithin(time.Hour, "an !a", func(m ircmsg.Message) bool {
			return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.HasPrefix(m.Params[1], "!a ")
		})
		if err != nil {
			return
		}
		u.Say(channel, m.Nick()+": Sorry, something went wrong running that command (the stand-in registers nothing).")
	}
}

// TestFreezeLeaderHoldsACommand: the freeze-leader fault stops the
// leader's process (here a stand-in, connected to a real ngircd as the
// bot) and at once types an !a of a fresh URL in the channel, recorded as
// a held Send inside the fault's window; the line waits in the stopped
// process's socket, and the stand-in, woken when the fault ends, reads
// it and answers, which the prober records as the command's reply.
func TestFreezeLeaderHoldsACommand(t *testing.T) {
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	prober := irctest.Dial(t, irc.Addr(), "prober")
	prober.Join(channel)
	standIn := testproc.Start(t, "node-a", os.Args[0], []string{"-test.run=^TestStandInLeader$"},
		testproc.Options{Env: append(os.Environ(), standInEnv+"="+irc.Addr())})
	prober.WaitBotPresent(botNick+"_0", channel)
	// Both nodes' /readyz say standby: the woken leader stood down.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"role":"standby"}`))
	}))
	defer web.Close()
	addr := strings.TrimPrefix(web.URL, "http://")
	old := leaseTTL
	leaseTTL = time.Second
	defer func() { leaseTTL = old }()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, seed: 7, rec: rec, jobs: newJobList(10), prober: prober, leader: "node-a",
		nodes:    [2]*node{{name: "node-a", web: addr, proc: standIn}, {name: "node-b", web: addr}},
		injected: map[string]int{}, skipped: map[string][]string{}}
	s.runFault(step{What: "freeze-leader"})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if s.injected["freeze-leader"] != 1 {
		t.Fatalf("the freeze was not injected: %v", s.skipped)
	}
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var start, send, end, reply *history.Event
	for i := range evs {
		e := &evs[i]
		switch {
		case e.Kind == history.Fault && e.Outcome == "start":
			start = e
		case e.Kind == history.Fault && e.Outcome == "end":
			end = e
		case e.Kind == history.Send:
			send = e
		case e.Kind == history.Reply:
			reply = e
		}
	}
	if start == nil || end == nil || send == nil {
		t.Fatalf("want the fault's window and a held command in it; history: %+v", evs)
	}
	want := "!a " + heldURL(7, 1)
	if send.Text != want || send.Fault != "freeze-leader" || send.Target != "node-a" || send.Actor != "prober" {
		t.Errorf("held command %+v; want the prober's %q, Fault freeze-leader, Target node-a", send, want)
	}
	if send.T.Before(start.T) || send.T.After(end.T) {
		t.Errorf("held command sent at %v, outside the fault's window %v to %v", send.T, start.T, end.T)
	}
	if reply == nil || reply.ID != send.ID || reply.Outcome == "timeout" || !strings.HasPrefix(reply.Text, "Sorry, something went wrong") {
		t.Fatalf("the woken stand-in's answer was not recorded as the held command's reply: %+v", reply)
	}
}
