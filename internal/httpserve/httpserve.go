// Package httpserve is the one HTTP server lifecycle of the node (the web
// API and live stream listeners, the pipeline API listener) and the one
// reader of the Retry-After header (the pipeline API's client, the
// tweeter's networks).
package httpserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/run"
)

// The web listener's timeouts, every listener's unless it sets its own.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	// ShutdownGrace is how long requests in flight get once the context
	// ends.
	ShutdownGrace = 5 * time.Second
)

// Timeouts bound a listener's connections (net/http's fields of the same
// names). Zero takes the web listener's value (the constants above); a
// negative value is no bound.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

func orDefault(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Server is the http.Server of h with t's timeouts (the web listener's
// where t has none), maxHeaderBytes and net/http's own error lines
// through log at warning level. base, when not nil, is the context every
// request's context derives from (its values, never its end).
func Server(h http.Handler, t Timeouts, maxHeaderBytes int, log *slog.Logger, base context.Context) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: orDefault(t.ReadHeader, ReadHeaderTimeout),
		ReadTimeout:       orDefault(t.Read, ReadTimeout),
		WriteTimeout:      orDefault(t.Write, WriteTimeout),
		IdleTimeout:       orDefault(t.Idle, IdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if base != nil {
		b := context.WithoutCancel(base)
		srv.BaseContext = func(net.Listener) context.Context { return b }
	}
	return srv
}

// Serve runs srv on ln (on a goroutine under run.Go) until ctx ends, then
// shuts it down gracefully: no new connections, requests in flight get
// ShutdownGrace to finish. It returns the error that stopped serving
// before ctx ended, else the shutdown's (nil when every request finished
// in time).
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger) error {
	done := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	run.Go(&wg, log, "http server", func() { done <- srv.Serve(ln) })
	select {
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}
