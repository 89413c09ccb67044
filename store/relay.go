package store

// The relay of the live stream (doc/architecture.md, The follower's
// stream): under ha.enabled the leader's firehose appends what it streams
// to KeyStreamRelay, in the same script that moves the broadcast
// bookmarks, and every node's live stream reads it from there.

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RelayMaxLen is the relay stream's length bound, in messages (XADD
// MAXLEN ~, so Redis may keep a little more): a node that falls further
// behind loses messages, and its reader says how many.
const RelayMaxLen = 10_000

// RelayMessage is one message of the relay stream.
type RelayMessage struct {
	ID, Body string
	// Seq is the message's number (field "n"; 0 when it has none): one
	// more than the message before it.
	Seq int64
}

// RelayBroadcast appends msgs to the relay stream and moves the broadcast
// bookmarks of marks, in one script (relay_mark.lua): the bookmarks move
// exactly when the relay holds the entries. moved[i] is as
// MarkBroadcastMany's. With neither messages nor marks it sends nothing.
func (s *Store) RelayBroadcast(ctx context.Context, msgs []string, marks []BroadcastMark) ([]bool, error) {
	if len(msgs) == 0 && len(marks) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 1+len(marks))
	keys = append(keys, KeyStreamRelay, KeyStreamRelaySeq)
	args := make([]any, 0, 2+len(msgs)+3*len(marks))
	args = append(args, RelayMaxLen, len(msgs))
	for _, m := range msgs {
		args = append(args, m)
	}
	for _, m := range marks {
		keys = append(keys, KeyJob(m.Ident))
		args = append(args, m.From, strconv.FormatFloat(m.To, 'f', -1, 64), strconv.FormatFloat(m.Now, 'f', -1, 64))
	}
	res, err := relayMarkScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return nil, wrap("relay the stream", err)
	}
	if len(res) != len(msgs)+len(marks) {
		return nil, wrap("relay the stream", errors.New("relay_mark.lua answered "+strconv.Itoa(len(res))+" values"))
	}
	moved := make([]bool, len(marks))
	for i := range marks {
		n, _ := res[len(msgs)+i].(int64)
		moved[i] = n == 1
	}
	return moved, nil
}

// ReadRelay reads up to count messages of the relay stream after the ID
// after, waiting up to block for the first (XREAD BLOCK); none when
// block passed. A message without its field "m" comes with an empty body.
func (s *Store) ReadRelay(ctx context.Context, after string, count int, block time.Duration) ([]RelayMessage, error) {
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{KeyStreamRelay, after}, Count: int64(count), Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("read the stream relay", err)
	}
	var out []RelayMessage
	for _, st := range res {
		for _, m := range st.Messages {
			b, _ := m.Values["m"].(string)
			n, _ := m.Values["n"].(string)
			seq, _ := strconv.ParseInt(n, 10, 64)
			out = append(out, RelayMessage{ID: m.ID, Body: b, Seq: seq})
		}
	}
	return out, nil
}

// RelayEnds returns the IDs of the first and the last message of the
// relay stream ("" when it is empty or absent), in one round trip.
func (s *Store) RelayEnds(ctx context.Context) (first, last string, err error) {
	var f, l *redis.XMessageSliceCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		f = p.XRangeN(ctx, KeyStreamRelay, "-", "+", 1)
		l = p.XRevRangeN(ctx, KeyStreamRelay, "+", "-", 1)
		return nil
	})
	if err != nil {
		return "", "", wrap("read the stream relay's ends", err)
	}
	if v := f.Val(); len(v) > 0 {
		first = v[0].ID
	}
	if v := l.Val(); len(v) > 0 {
		last = v[0].ID
	}
	return first, last, nil
}
