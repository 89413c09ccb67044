package web

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// Serve answers over TCP until its context ends, then returns; Listen on
// a taken address says so.
func TestServeAndShutdown(t *testing.T) {
	b := redistest.Mini(t)
	s := New(Options{Store: store.New(b.Client)})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(ln.Addr().String()); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second Listen on %s: %v, want ErrAddrInUse", ln.Addr(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Fatal("still answering after shutdown")
	}
}
