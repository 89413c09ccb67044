package client_test

import (
	"context"
	"crypto/ed25519"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
)

// TestConnectionsReused: a pipeline's concurrent calls reuse their
// connections. With net/http's default of 2 idle connections per host,
// each round of 8 calls at once opened 6 new connections (each one's
// setup paid by the pipeline, any proxy and the node).
func TestConnectionsReused(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Calls overlap, as a pipeline's do.
		time.Sleep(time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, priv, _ := ed25519.GenerateKey(nil)
	c, err := client.New(srv.URL, "alpha", priv)
	if err != nil {
		t.Fatal(err)
	}
	// Rounds of 8 calls at once, as a pipeline's jobs flush their
	// updates together: between rounds all 8 connections are idle.
	const workers, rounds = 8, 10
	for range rounds {
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Heartbeat(context.Background(), "job"); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	// At most one connection per call of a round, and a few more where a
	// call starts while another's connection is on its way back.
	if n := opened.Load(); n > 2*workers {
		t.Errorf("%d rounds of %d calls at once opened %d connections; want at most %d", rounds, workers, n, 2*workers)
	}
}
