package irc

import (
	"os"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestMain lets six parallel tests run at once: they mostly wait on the
// IRC servers they start (ngircd's flood penalty, InspIRCd and Atheme
// starting, registration), not on the CPU. At the default of GOMAXPROCS
// (two here) the package took 56 s; at six, 25–30 s, under -race too.
func TestMain(m *testing.M) {
	testproc.WaitingParallel(6)
	os.Exit(m.Run())
}
