package store

// The live log stream (the firehose) and the pub/sub channels: read what
// a job logged since it was last broadcast, move the broadcast bookmark,
// and listen to updates and job events (see doc/protocol.md, Live stream).

import (
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ListenUpdates subscribes to `updates` and calls onMessage with the ident
// of every message until the connection fails or ctx ends; onSubscribed is
// called once the server confirmed the subscription. It reports whether
// the subscription was established.
func (s *Store) ListenUpdates(ctx context.Context, onSubscribed func(), onMessage func(ident string)) (bool, error) {
	return s.listen(ctx, ChannelUpdates, onSubscribed, onMessage)
}

// listen subscribes to channel and delivers its messages (ListenUpdates).
func (s *Store) listen(ctx context.Context, channel string, onSubscribed func(), onMessage func(string)) (bool, error) {
	ps := s.rdb.Subscribe(ctx)
	defer ps.Close()
	// A blocked read does not watch ctx: closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	if err := ps.Subscribe(ctx, channel); err != nil {
		return false, err
	}
	// Wait for the server's confirmation so callers know we are listening.
	if _, err := ps.Receive(ctx); err != nil {
		return false, err
	}
	onSubscribed()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return true, err
		}
		if m, ok := msg.(*redis.Message); ok {
			onMessage(m.Payload)
		}
		// Anything else is a pong or a subscription confirmation.
	}
}

// Unbroadcast is what a job logged since the stream last sent its log.
type Unbroadcast struct {
	// Job is the raw job hash (every value a string); nil when the job
	// record does not exist.
	Job map[string]string
	// Bookmark is last_broadcasted_log_entry as read ("" = none).
	Bookmark string
	// Entries past the bookmark, in score order.
	Entries []LogEntry
}

// ReadUnbroadcast reads the job hash, then up to limit entries of its log
// scored after last_broadcasted_log_entry: two round trips. A key that is
// not a hash is a *NotAJobError.
func (s *Store) ReadUnbroadcast(ctx context.Context, ident string, limit int) (Unbroadcast, error) {
	job, err := s.rdb.HGetAll(ctx, KeyJob(ident)).Result()
	if isWrongType(err) {
		return Unbroadcast{}, &NotAJobError{Key: KeyJob(ident)}
	}
	if err != nil {
		return Unbroadcast{}, wrap("read job "+ident, err)
	}
	if len(job) == 0 {
		return Unbroadcast{}, nil
	}
	u := Unbroadcast{Job: job, Bookmark: job["last_broadcasted_log_entry"]}
	u.Entries, err = s.ReadLog(ctx, ident, u.Bookmark, limit)
	if isWrongType(err) {
		return u, nil // not a log: nothing to stream
	}
	return u, err
}

// MarkBroadcast moves the job's last_broadcasted_log_entry from from to
// to and sets its ts to now (broadcast.lua). It reports false when the
// bookmark had moved or the job is gone; nothing is written then.
func (s *Store) MarkBroadcast(ctx context.Context, ident, from string, to float64, now float64) (bool, error) {
	res, err := broadcastScript.Run(ctx, s.rdb, []string{KeyJob(ident)}, from,
		strconv.FormatFloat(to, 'f', -1, 64), strconv.FormatFloat(now, 'f', -1, 64)).Int64()
	if err != nil {
		return false, wrap("mark broadcast of "+ident, err)
	}
	return res == 1, nil
}

// EndState is what the stream needs to tell how a job that left
// `working` ended: its hash (nil when expired) and its failure record.
type EndState struct {
	Job     map[string]string
	Failure *Failure
}

// ReadEndState reads the job hash and its failure record in one round
// trip.
func (s *Store) ReadEndState(ctx context.Context, ident string) (EndState, error) {
	var job, fail *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		job = p.HGetAll(ctx, KeyJob(ident))
		fail = p.HGetAll(ctx, KeyFailed(ident))
		return nil
	})
	if err != nil && !isWrongType(err) && !errors.Is(err, redis.Nil) {
		return EndState{}, wrap("read state of "+ident, err)
	}
	var st EndState
	if m := job.Val(); len(m) > 0 {
		st.Job = m
	}
	if m := fail.Val(); len(m) > 0 {
		st.Failure = parseFailure(ident, m)
	}
	return st, nil
}

// ListenJobEvents subscribes to ChannelJobEvents and calls onMessage with
// every document until the connection fails or ctx ends, as ListenUpdates.
func (s *Store) ListenJobEvents(ctx context.Context, onSubscribed func(), onMessage func(doc string)) (bool, error) {
	return s.listen(ctx, ChannelJobEvents, onSubscribed, onMessage)
}
