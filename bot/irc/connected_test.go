package irc

import (
	"context"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

// TestWaitConnected: WaitConnected returns once the client registers (a
// wait started before), at once while it is connected, and waits again
// after a disconnect until the server is back.
func TestWaitConnected(t *testing.T) {
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	n.Stop()
	h := startBot(t, testIRCConfig(n.URL(), "#test"), nil)
	waited := make(chan bool, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waited <- h.client.WaitConnected(ctx)
	}()
	n.Start()
	if !<-waited {
		t.Fatal("WaitConnected gave up before the client registered")
	}
	if !h.client.Connected() {
		t.Error("WaitConnected returned true while not connected")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if !h.client.WaitConnected(done) {
		t.Error("WaitConnected while connected: false")
	}

	n.Stop()
	h.waitState(false)
	if h.client.WaitConnected(done) {
		t.Error("WaitConnected after the disconnect: true")
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waited <- h.client.WaitConnected(ctx)
	}()
	n.Start()
	if !<-waited {
		t.Fatal("WaitConnected gave up before the client registered again")
	}
}
