package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// roleFrontEnd is an HA node's front end as actionOptions sees it.
type roleFrontEnd struct{}

func (roleFrontEnd) Announce(context.Context, string, string) error { return nil }
func (roleFrontEnd) Channels() []string                             { return nil }
func (roleFrontEnd) Run(context.Context) error                      { return nil }
func (roleFrontEnd) Role() string                                   { return "standby" }

// The dashboard options' warnings go to the node's logger (its handler,
// its fields), not slog.Default.
func TestActionOptionsLogThroughTheNodeLogger(t *testing.T) {
	b := redistest.Mini(t)
	st := store.New(b.Client)
	b.Mini.Close() // recording the address fails
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil)).With("node", "node-x")
	cfg := &config.Config{}
	cfg.HTTP.PublicURL = "https://x.example/"
	cfg.HA.NodeID = "node-x"
	if opt := actionOptions(cfg, bot.New(st, bot.Options{}), st, roleFrontEnd{}, log, nil); opt == nil {
		t.Fatal("no action options with a public URL")
	}
	if got := buf.String(); !strings.Contains(got, "could not record this node's dashboard address") || !strings.Contains(got, "node=node-x") {
		t.Fatalf("node logger got %q", got)
	}
}
