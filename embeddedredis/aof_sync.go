package embeddedredis

// The write-ahead log (aof.go): Sync, and the hook that makes a client's
// writes durable before it answers.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sync makes every write the server has run so far durable: it returns
// once they are in the log on disk. It does nothing without a DataDir, and
// is cheap when nothing is pending; concurrent calls share one fsync.
func (s *Server) Sync(ctx context.Context) error {
	if s.aof == nil || !s.aof.pending() {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.aof.flush() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrNotDurable is wrapped by the error a client sees through SyncHook when
// its command ran but could not be made durable (the log could not be
// written to disk).
var ErrNotDurable = errors.New("embedded redis: the change was made but could not be saved to disk")

// SyncHook returns a go-redis hook that calls Sync after every write
// command and every pipeline with a write of the client it is added to,
// before the caller sees the reply: whatever that client's caller
// acknowledges is durable. Reads do not wait for the disk. A Sync that
// fails turns the reply into an error wrapping ErrNotDurable.
func (s *Server) SyncHook() redis.Hook { return syncHook{s} }

type syncHook struct{ s *Server }

func (h syncHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h syncHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !mayWrite(cmd) {
			return err
		}
		if serr := h.s.Sync(ctx); serr != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrNotDurable, serr)
			cmd.SetErr(err)
		}
		return err
	}
}

func (h syncHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !slices.ContainsFunc(cmds, mayWrite) {
			return err
		}
		if serr := h.s.Sync(ctx); serr != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrNotDurable, serr)
			for _, c := range cmds {
				if c.Err() == nil {
					c.SetErr(err)
				}
			}
		}
		return err
	}
}

// mayWrite says whether a client's command is one the log records.
func mayWrite(cmd redis.Cmder) bool {
	name := strings.ToUpper(cmd.Name())
	return commandClasses[name] != notLogged || name == "EXEC"
}

// syncLoop writes and fsyncs the log every aofSyncInterval.
func (s *Server) syncLoop() {
	s.every(s.syncEvery, "log sync", func() {
		if err := s.aof.flush(); err != nil {
			s.logSyncError(err)
		}
	})
}

func (s *Server) logSyncError(err error) {
	if s.warnedSync.CompareAndSwap(false, true) {
		s.log.Error("embedded redis: writing the log failed; writes are durable again after the next successful snapshot", "err", err)
	}
}
