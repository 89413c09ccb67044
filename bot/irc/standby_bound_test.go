package irc

import (
	"fmt"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// A CHATHISTORY batch is the server's to size: the commands a standby
// holds from it count against the same bound (maxHeld, the oldest
// dropped and counted) as the ones it read itself.
func TestStandbyHistoryHeldBounded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		st := store.New(b.Client)
		c := New(testIRCConfig("irc://127.0.0.1:1", "#h"), bot.New(st, bot.Options{Logger: testLogger(t)}), testLogger(t))
		c.Standby = &Standby{Nick: "ABsbH", Window: time.Minute, Ledger: st}
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		var items []ircmsg.Message
		for i := range maxHeld + 500 {
			m := ircmsg.MakeMessage(map[string]string{"time": now}, fmt.Sprintf("u%d!u@h", i), "PRIVMSG", "#h", "!status")
			items = append(items, m)
		}
		c.standbyHistory(items)
		c.sb.mu.Lock()
		held, dropped := len(c.sb.held), c.sb.dropped
		c.sb.mu.Unlock()
		if held == 0 {
			t.Fatal("nothing held from the batch (the test's lines are not commands?)")
		}
		if held > maxHeld {
			t.Errorf("%d commands held from one CHATHISTORY batch, want at most %d", held, maxHeld)
		}
		if dropped != 500 {
			t.Errorf("%d held commands dropped (counted), want 500", dropped)
		}
	})
}
