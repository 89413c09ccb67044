// Package apitest runs the pipeline API server for the tests of its
// clients (the bridge, the pipeline simulator): a server behind an
// httptest listener, and keys registered with it; and, for the client's
// runnable examples, a whole node on an in-process Redis (Node).
package apitest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/third_party/miniredis"
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

// Node is a pipeline API server over an in-process Redis (miniredis), for
// the client's runnable examples, which have no testing.TB: what Serve
// and Client give a test. Close ends it.
type Node struct {
	// URL is the server's address, as a pipeline is given it.
	URL string
	// Store is the store the server runs on.
	Store *store.Store

	stop func()
}

// StartNode starts a Node with the test settings of Serve.
func StartNode() (*Node, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	st := store.New(rdb)
	srv := pipelineapi.New(pipelineapi.Options{Store: st, KeyRefresh: 50 * time.Millisecond,
		FlushInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	return &Node{URL: hs.URL, Store: st, stop: func() { cancel(); <-done; hs.Close(); rdb.Close(); mr.Close() }}, nil
}

// Close stops the server and its Redis.
func (n *Node) Close() { n.stop() }

// Queue registers a job for url in pending, as `!a URL` does, and returns
// its ident.
func (n *Node) Queue(ctx context.Context, url string) (string, error) {
	id := ident.Of(url)
	return id, n.Store.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", StartedBy: "alice",
		StartedIn: "#archivebot", Queue: store.KeyPending})
}

// Key registers a new key name and returns a client signing with it,
// once the server knows the key (within a few seconds).
func (n *Node) Key(ctx context.Context, name string) (*client.Client, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := n.Store.AddPipelineKey(ctx, name, wire.FormatPublicKey(pub)); err != nil {
		return nil, err
	}
	c, err := client.New(n.URL, name, priv)
	if err != nil {
		return nil, err
	}
	// The server reads its keys every KeyRefresh: ask until it answers a
	// job lookup not_held (it knows the key), not unknown_key.
	for range 100 {
		if _, err = c.Job(ctx, "none"); client.IsCode(err, "not_held") {
			return c, nil
		}
		if !retry.Sleep(ctx, 50*time.Millisecond) {
			break
		}
	}
	return nil, fmt.Errorf("the server does not know key %s: %w", name, err)
}
