package main

import (
	"testing"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/store"
)

// A held command that changes jobs is known to have run by its record
// (archivebot:irc:ran:KEY), which lives as long as the command's outcome
// record: the replay window may not outlive it, or a held command would
// find no record at a takeover and run twice.
func TestIRCReplayWindowWithinCommandRecord(t *testing.T) {
	if config.MaxIRCReplayWindow > store.DefaultCommandTTL {
		t.Fatalf("config.MaxIRCReplayWindow %s outlives store.DefaultCommandTTL %s", config.MaxIRCReplayWindow, store.DefaultCommandTTL)
	}
}
