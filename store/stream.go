package store

// The live log stream (the firehose) and the pub/sub channels: read what
// a job logged since it was last broadcast, move the broadcast bookmark,
// and listen to updates and job events (see doc/protocol.md, Live stream).

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/record"
)

// ListenUpdates subscribes to `updates` and calls onMessage with the ident
// of every message until the connection fails or ctx ends; onSubscribed is
// called once the server confirmed the subscription. It reports whether
// the subscription was established.
func (s *Store) ListenUpdates(ctx context.Context, onSubscribed func(), onMessage func(ident string)) (bool, error) {
	return s.listen(ctx, ChannelUpdates, onSubscribed, onMessage)
}

// listen subscribes to channel and delivers its messages' payloads
// (ListenUpdates, ListenJobEvents).
func (s *Store) listen(ctx context.Context, channel string, onSubscribed func(), onMessage func(string)) (bool, error) {
	return s.follow(ctx, false, channel, onSubscribed, func(m *redis.Message) { onMessage(m.Payload) })
}

// follow subscribes to channel (a pattern when pattern is set) and calls
// onMessage for each message until the connection fails or ctx ends;
// onSubscribed once the server confirmed the subscription. It reports
// whether the subscription was established.
func (s *Store) follow(ctx context.Context, pattern bool, channel string, onSubscribed func(), onMessage func(*redis.Message)) (bool, error) {
	var ps *redis.PubSub
	if pattern {
		ps = s.rdb.PSubscribe(ctx, channel)
	} else {
		ps = s.rdb.Subscribe(ctx, channel)
	}
	defer ps.Close()
	// A blocked read does not watch ctx: closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
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
			onMessage(m)
		}
		// Anything else is a pong or a subscription confirmation.
	}
}

// Unbroadcast is what a job logged since the stream last sent its log.
type Unbroadcast struct {
	// Job is the job record as read; nil when it does not exist.
	Job *record.Job
	// Bookmark is last_broadcasted_log_entry as read ("" = none).
	Bookmark string
	// Entries past the bookmark, in score order.
	Entries []record.LogEntry
}

// EndState is what the stream needs to tell how a job that left
// `working` ended: its record (nil when expired) and its failure record.
type EndState struct {
	Job     *record.Job
	Failure *record.Failure
	// NotAJob is true when the key holds another type (not a hash):
	// another program's key, not a job.
	NotAJob bool
}

// State is the job's state (StateOf its record and failure record).
func (e EndState) State() record.State { return record.StateOf(e.Job, e.Failure, false) }

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
	st.NotAJob = isWrongType(job.Err())
	if m := job.Val(); len(m) > 0 {
		st.Job = record.DecodeJob(ident, m)
	}
	if m := fail.Val(); len(m) > 0 {
		st.Failure = record.DecodeFailure(ident, m)
	}
	st.Job, st.Failure = record.Speaking(st.Job, st.Failure)
	return st, nil
}

// ListenJobEvents subscribes to ChannelJobEvents and calls onMessage with
// every document until the connection fails or ctx ends, as ListenUpdates.
func (s *Store) ListenJobEvents(ctx context.Context, onSubscribed func(), onMessage func(doc string)) (bool, error) {
	return s.listen(ctx, ChannelJobEvents, onSubscribed, onMessage)
}

// JobsExist reports, for each ident, whether its job record exists: one
// pipeline of EXISTS.
func (s *Store) JobsExist(ctx context.Context, idents []string) ([]bool, error) {
	cmds := make([]*redis.IntCmd, len(idents))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			cmds[i] = p.Exists(ctx, KeyJob(id))
		}
		return nil
	})
	if err != nil {
		return nil, wrap("check jobs exist", err)
	}
	out := make([]bool, len(idents))
	for i, c := range cmds {
		out[i] = c.Val() > 0
	}
	return out, nil
}

// ReadUnbroadcastMany reads, for each job, its hash and up to limit
// entries of its log scored after last_broadcasted_log_entry (a ghost or
// a missing hash has nothing to stream), in two round trips whatever
// their number: one pipeline of HGETALL, then one of read_log for the
// jobs that exist. errs[i] is a *NotAJobError for a key
// that is not a hash (or whose log is not a sorted set: nothing to
// stream then), nil otherwise; err is a failure of Redis itself.
func (s *Store) ReadUnbroadcastMany(ctx context.Context, idents []string, limit int) (out []Unbroadcast, errs []error, err error) {
	out, errs = make([]Unbroadcast, len(idents)), make([]error, len(idents))
	hashes := make([]*redis.MapStringStringCmd, len(idents))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			hashes[i] = p.HGetAll(ctx, KeyJob(id))
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read jobs to stream", err)
	}
	var live []int
	for i, c := range hashes {
		switch {
		case isWrongType(c.Err()):
			errs[i] = &NotAJobError{Key: KeyJob(idents[i])}
		case len(c.Val()) > 0:
			j := record.DecodeJob(idents[i], c.Val())
			if j.Ghost() {
				continue // not a job: nothing to stream
			}
			out[i] = Unbroadcast{Job: j, Bookmark: j.LastBroadcast}
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return out, errs, nil
	}
	logs := make([]*redis.Cmd, len(live))
	read := func(p redis.Pipeliner) error {
		for k, i := range live {
			bm := out[i].Bookmark
			if bm == "" {
				bm = "0"
			}
			logs[k] = readLogScript.EvalSha(ctx, p, []string{KeyLog(idents[i])}, "after", bm, limit,
				record.MaxLogEntryBytes, MaxLogReadBytes)
		}
		return nil
	}
	err = s.pipelinedScript(ctx, readLogScript, read)
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read logs to stream", err)
	}
	for k, i := range live {
		entries, perr := parseLogRead(logs[k].Val())
		if perr != nil || logs[k].Err() != nil {
			continue // not a log: nothing to stream
		}
		out[i].Entries = entries
	}
	return out, errs, nil
}

// BroadcastMark is one move of a job's broadcast bookmark
// (MarkBroadcastMany).
type BroadcastMark struct {
	Ident, From string
	To, Now     float64
}

// MarkBroadcastMany moves, for each mark, the job's
// last_broadcasted_log_entry from From to To and sets its ts to Now
// (broadcast.lua), all in one round trip; moved[i] is false when that
// bookmark had moved or the job is gone (nothing is written then).
func (s *Store) MarkBroadcastMany(ctx context.Context, marks []BroadcastMark) ([]bool, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.Cmd, len(marks))
	fence := fenceToken(ctx)
	run := func(p redis.Pipeliner) error {
		for i, m := range marks {
			cmds[i] = broadcastScript.Script.EvalSha(ctx, p, []string{KeyJob(m.Ident), KeyLeader}, m.From,
				strconv.FormatFloat(m.To, 'f', -1, 64), strconv.FormatFloat(m.Now, 'f', -1, 64), fence)
		}
		return nil
	}
	err := s.pipelinedScript(ctx, broadcastScript.Script, run)
	if err != nil {
		return nil, wrap("mark broadcast", err)
	}
	moved := make([]bool, len(marks))
	for i, c := range cmds {
		n, _ := c.Int64()
		moved[i] = n == 1
	}
	return moved, nil
}
