package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// KeyWebNodes is a hash of HA node id → that node's http.public_url, so
// that a standby can tell a dashboard user where the leader's dashboard is
// (doc/web.md, Signing in and acting). Each node writes its own field at
// start; a field is at most webNodeURLMax bytes.
const KeyWebNodes = "archivebot:web:nodes"

const webNodeURLMax = 512

// SetNodeURL records node's public dashboard address (one HSET: atomic on
// its own). An empty url removes the node's field.
func (s *Store) SetNodeURL(ctx context.Context, node, url string) error {
	if url == "" {
		return wrap("forget node url", s.rdb.HDel(ctx, KeyWebNodes, node).Err())
	}
	if len(url) > webNodeURLMax {
		url = url[:webNodeURLMax]
	}
	return wrap("set node url", s.rdb.HSet(ctx, KeyWebNodes, node, url).Err())
}

// NodeURL is node's public dashboard address, "" when it never said one.
func (s *Store) NodeURL(ctx context.Context, node string) (string, error) {
	v, err := s.rdb.HGet(ctx, KeyWebNodes, node).Result()
	if errors.Is(err, redis.Nil) || isWrongType(err) {
		return "", nil
	}
	return v, wrap("read node url", err)
}
