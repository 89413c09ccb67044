package store

// The clean-ups of a switch back to upstream's bot (doc/migrating.md,
// Rolling back): finish notices a stopped node had taken put back where
// upstream's bot pops them, and the node's own keys removed. The command
// (`archivebot migrate`) checks first that no node runs.

import (
	"context"
	"errors"
	"strings"
)

// noticeReturnScript moves a processing list back to its pending list.
var noticeReturnScript = fenced(lua("notice_return"))

// ReturnFinishNotices puts the finish notices a stopped node had taken
// and not said (archivebot:finish_notifications:processing) back at the
// head of finish_notifications, oldest first and before those already
// waiting, in one script. It returns how many it moved.
func (s *Store) ReturnFinishNotices(ctx context.Context) (int, error) {
	n, err := noticeReturnScript.Run(ctx, s.rdb, []string{KeyFinishProcessing, KeyFinishNotifications}).Int()
	return n, wrap("move the finish notices back", err)
}

// nodeKeyPattern matches every key of the node's own (doc/protocol.md,
// Keys of our own); none of upstream's keys starts so.
const nodeKeyPattern = "archivebot:*"

// nodeKeysBatch is how many keys one SCAN round asks for and one UNLINK
// removes.
const nodeKeysBatch = 500

// NodeKeys counts the node's own keys (archivebot:…) by their second
// segment (archivebot:history:X → "history"), with one SCAN.
func (s *Store) NodeKeys(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	iter := s.rdb.Scan(ctx, 0, nodeKeyPattern, nodeKeysBatch).Iterator()
	for iter.Next(ctx) {
		seg, _, _ := strings.Cut(strings.TrimPrefix(iter.Val(), "archivebot:"), ":")
		out[seg]++
	}
	return out, wrap("scan the node's keys", iter.Err())
}

// DeleteNodeKeys removes every key of the node's own (archivebot:…), in
// batches of SCAN then UNLINK, and returns how many it removed. It is
// not one step (the keys may be many: a history per job); run again, it
// goes on where it stopped. Nothing else is touched.
func (s *Store) DeleteNodeKeys(ctx context.Context) (int, error) {
	var cursor uint64
	n := 0
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, nodeKeyPattern, nodeKeysBatch).Result()
		if err != nil {
			return n, wrap("scan the node's keys", err)
		}
		if len(keys) > 0 {
			got, err := s.rdb.Unlink(ctx, keys...).Result()
			if err != nil {
				return n, wrap("remove the node's keys", err)
			}
			n += int(got)
		}
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

// Clients is CLIENT LIST. A refusal (an ACL without client|list, or a
// server without the command) is ErrClientsRefused wrapping Redis's
// answer; an unreachable Redis is the usual unavailable error.
func (s *Store) Clients(ctx context.Context) ([]RedisClient, error) {
	list, err := s.rdb.ClientList(ctx).Result()
	if err != nil {
		if IsUnavailable(err) {
			return nil, wrap("list the clients", err)
		}
		return nil, &clientsRefused{err}
	}
	return parseClientList(list), nil
}

// ErrClientsRefused is what Clients's error is when Redis refused CLIENT
// LIST.
var ErrClientsRefused = errors.New("CLIENT LIST was refused")

type clientsRefused struct{ err error }

func (e *clientsRefused) Error() string { return e.err.Error() }

func (e *clientsRefused) Is(target error) bool { return target == ErrClientsRefused }

func (e *clientsRefused) Unwrap() error { return e.err }
