package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrOutcomeUnknown is wrapped by errors of writes that were sent to Redis
// but got no reply (a read timeout, a connection lost after sending): the
// change may or may not have been made. Errors that wrap it also satisfy
// IsUnavailable, since Redis did not answer.
//
// A write that failed before anything was sent (connection refused, no
// connection from the pool, the client closed) is ErrUnavailable only:
// nothing happened.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// IsOutcomeUnknown reports whether err is a write whose outcome is unknown.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// DefaultCommandTTL is how long a command's outcome record lives unless the
// caller says otherwise.
const DefaultCommandTTL = 10 * time.Minute

type commandKey struct{}

type commandRecord struct {
	id  string
	ttl time.Duration
}

// WithCommand returns a context under which the store's writes for a user
// command (Register, ChangeSettings, Abort, FailJob, Expire) record their
// outcome under archivebot:cmd:ID for ttl, in the same script as the
// change. Run again under the same id, a write that was made returns its
// recorded result and changes nothing, so a command whose reply was lost
// can be sent again to learn what happened, and is applied at most once.
func WithCommand(ctx context.Context, id string, ttl time.Duration) context.Context {
	if ttl <= 0 {
		ttl = DefaultCommandTTL
	}
	return context.WithValue(ctx, commandKey{}, commandRecord{id: id, ttl: ttl})
}

// commandArgs are the three trailing ARGV of the command-record prologue
// (scripts/cmdrecord.lua): the record's lifetime and key, and the key
// that records the IRC line the command was read from (WithIRCLine).
func commandArgs(ctx context.Context) []any {
	ran := ""
	if line, ok := ctx.Value(ircLineKey{}).(string); ok && line != "" {
		ran = KeyIRCRan(line)
	}
	rec, ok := ctx.Value(commandKey{}).(commandRecord)
	if !ok || rec.id == "" {
		return []any{0, "", ""}
	}
	secs := int64(rec.ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	return []any{secs, KeyCommand(rec.id), ran}
}

// noRetryCmd keeps go-redis from sending a write again on its own after a
// timeout or a lost connection: whether a write was sent must be known to
// tell "nothing happened" from "outcome unknown", and a resend is the
// caller's decision (under the same command id, which makes it safe).
type noRetryCmd struct{ *redis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// ErrNotReplicated is wrapped (with ErrOutcomeUnknown) by a write that
// Redis made but fewer replicas than WithWait asked confirmed within
// its timeout: a failover now could lose it. Sending the command
// again under the same id finds its record and waits again.
var ErrNotReplicated = errors.New("not confirmed by the replicas")

// runWrite runs one of the command scripts (EVALSHA, then EVAL when the
// server does not have it) with the command-record arguments and the fence
// arguments appended, and classifies its failure: a Redis error reply as
// it is (ErrUnavailable for replies meaning "not now"), a failure before
// sending as ErrUnavailable, anything after sending as ErrOutcomeUnknown. With WithWait's replicas set, a write that
// succeeded is followed by WAIT on the same connection, and too few
// replicas make it ErrOutcomeUnknown and ErrNotReplicated.
func (s *Store) runWrite(ctx context.Context, op string, sc *fencedScript, keys []string, argv ...any) *redis.Cmd {
	argv = append(argv, commandArgs(ctx)...)
	tok := fenceToken(ctx)
	if tok == "" && s.commandFence != nil {
		tok = s.commandFence()
	}
	keys = append(keys[:len(keys):len(keys)], KeyLeader)
	argv = append(argv, tok)
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	process := s.rdb.Process
	var conn *redis.Conn
	if s.wantReplicas > 0 {
		// WAIT counts the replicas that have this connection's writes:
		// the script and WAIT must share one connection.
		c, ok := s.rdb.(interface{ Conn() *redis.Conn })
		if !ok {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(fmt.Errorf("%s: redis.wait_replicas needs a single-master client", op))
			return cmd
		}
		conn = c.Conn()
		defer conn.Close()
		process = conn.Process
	}
	var info *redis.StringCmd
	if conn != nil && s.positions != nil {
		// INFO replication in the same round trip, right behind the
		// script: where the write ended in the replication stream.
		process = func(ctx context.Context, cmd redis.Cmder) error {
			conn.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Process(ctx, cmd)
				info = p.Info(ctx, "replication")
				return nil
			})
			return cmd.Err()
		}
	}
	cmd := redis.NewCmd(ctx, args...)
	err := process(ctx, noRetryCmd{cmd})
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		args[0], args[1] = "eval", sc.src
		cmd = redis.NewCmd(ctx, args...)
		err = process(ctx, noRetryCmd{cmd})
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		cmd.SetErr(classifyWrite(op, err))
		return cmd
	}
	if conn != nil {
		if werr := s.waitReplicas(ctx, conn); werr != nil {
			cmd.SetErr(fmt.Errorf("%s: %w", op, werr))
		} else if s.positions != nil {
			s.positions.Confirmed(s.noteInfo(info), op, time.Now())
		}
	}
	return cmd
}

// waitReplicas runs WAIT on conn after a write.
func (s *Store) waitReplicas(ctx context.Context, conn *redis.Conn) error {
	timeout := s.waitTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ms := timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	w := redis.NewCmd(ctx, "wait", s.wantReplicas, ms)
	if err := conn.Process(ctx, noRetryCmd{w}); err != nil {
		// The write was made: whatever WAIT's failure, its fate is unknown.
		return fmt.Errorf("%w: %w: wait: %w", ErrOutcomeUnknown, ErrUnavailable, err)
	}
	n, err := w.Int64()
	if err != nil {
		return fmt.Errorf("%w: wait: %w", ErrOutcomeUnknown, err)
	}
	if n < int64(s.wantReplicas) {
		return fmt.Errorf("%w: %w: %d of %d replicas within %v", ErrOutcomeUnknown, ErrNotReplicated, n, s.wantReplicas, timeout)
	}
	return nil
}

// classifyWrite wraps the error of a write sent with runWrite.
func classifyWrite(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) || notSent(err) {
		return wrap(op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrOutcomeUnknown, err)
}

// notSent reports errors that go-redis returns before writing a command:
// no connection could be made or taken from the pool.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}
