// Package apitest runs the pipeline API server for the tests of its
// clients (the bridge, the pipeline simulator): a server behind an
// httptest listener, and keys registered with it.
package apitest

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// Serve runs a server of opt (opt.Store is required) behind an httptest
// listener until the test ends. A zero KeyRefresh or FlushInterval is
// 50ms, so that keys and log entries go through at once; a nil Logger
// discards.
func Serve(t testing.TB, opt pipelineapi.Options) *httptest.Server {
	t.Helper()
	if opt.KeyRefresh == 0 {
		opt.KeyRefresh = 50 * time.Millisecond
	}
	if opt.FlushInterval == 0 {
		opt.FlushInterval = 50 * time.Millisecond
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := pipelineapi.New(opt)
	hs := httptest.NewServer(srv.Handler())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done; hs.Close() })
	return hs
}

// Keys is apitest's door to the store: the one method of *store.Store
// it calls, to register a pipeline's key (the server itself takes
// pipelineapi.Store, in Options).
type Keys interface {
	AddPipelineKey(ctx context.Context, name, pub string) error
}

// Client registers a new key name in st and returns a client of the
// server at url signing with it, once the server knows the key (it
// answers a job lookup not_held, not unknown_key).
func Client(t testing.TB, st Keys, url, name string) *client.Client {
	t.Helper()
	ctx := context.Background()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPipelineKey(ctx, name, wire.FormatPublicKey(pub)); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(url, name, priv)
	if err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, "the server to know key "+name, func() bool {
		_, err := c.Job(ctx, "none")
		return client.IsCode(err, "not_held")
	})
	return c
}
