package irc

import (
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// A leader under ha.irc_standby answers a read typed twice by the same
// user in the same channel, the second time too: the line's record (a
// hash of sender, target and text on a server without msgid) keeps a
// held line from being answered again at a takeover, not a line typed
// anew while the node leads. doc/reliability.md: "A line that reaches the
// new leader's connection after the takeover ... is run on arrival
// without a check".
func TestHotStandbyLeaderAnswersARepeatedRead(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		srv := irctest.StartServer(t, "ngircd") // no msgid: the hash key
		const ch = "#rep"
		u := irctest.Connect(t, srv.Addr(), "rita")
		u.Registered()
		u.Join(ch)
		startSBNode(t, b, srv, ch, "node-r", "ABsbR", true)
		testproc.Eventually(t, "the leader in the channel", func() bool { return nickJoined(u, "ArchiveBot", ch) })
		for i := 1; i <= 2; i++ {
			if r := u.Ask("ArchiveBot", ch, "!pending"); len(r) == 0 {
				t.Fatalf("!pending typed the %d. time: no answer (a repeated read dropped as 'an earlier leader ran it')", i)
			}
		}
	})
}
