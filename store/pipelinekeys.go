package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipeline keys as the operator manages them (`archivebot pipeline-key`,
// the admin CLI's door): register, revoke, list. The pipeline API reads
// them (PipelineKeys) in pipelineapi.go.

// PipelineKey is a registered pipeline API key.
type PipelineKey struct {
	Name string
	// PublicKey is the text as stored ("ed25519:…"); empty when revoked.
	PublicKey string
	Revoked   bool
	RevokedAt time.Time
	// Stats: AddedAt, LastSeen (zero when never), Refusals, LastRefusal.
	AddedAt     time.Time
	LastSeen    time.Time
	Refusals    int64
	LastRefusal string
	// Held is how many jobs the key holds (the size of its held set).
	Held int64
}

// AddPipelineKey registers (or replaces) name's public key and clears a
// revocation, in one MULTI.
func (s *Store) AddPipelineKey(ctx context.Context, name, pub string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, KeyPipelineKeys, name, pub)
		p.HDel(ctx, KeyPipelineKeysRevoked, name)
		p.HSet(ctx, KeyPipelineKeyStats(name), "added_at", strconv.FormatInt(s.Now().Unix(), 10))
		return nil
	})
	return wrap("add pipeline key "+name, err)
}

// ErrNoPipelineKey: no key of that name is registered.
var ErrNoPipelineKey = errors.New("no such pipeline key")

// RevokePipelineKey revokes name, in one MULTI: its public key is removed
// and the time recorded. Nodes notice within their refresh (250 ms).
func (s *Store) RevokePipelineKey(ctx context.Context, name string) error {
	n, err := s.rdb.HExists(ctx, KeyPipelineKeys, name).Result()
	if err != nil {
		return wrap("revoke pipeline key "+name, err)
	}
	if !n {
		return fmt.Errorf("%w: %s", ErrNoPipelineKey, name)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, KeyPipelineKeys, name)
		p.HSet(ctx, KeyPipelineKeysRevoked, name, strconv.FormatInt(s.Now().Unix(), 10))
		return nil
	})
	return wrap("revoke pipeline key "+name, err)
}

// ListPipelineKeys returns every key, active and revoked, sorted by name,
// with its statistics and held count.
func (s *Store) ListPipelineKeys(ctx context.Context) ([]PipelineKey, error) {
	active, revoked, err := s.PipelineKeys(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(active)+len(revoked))
	for n := range active {
		names = append(names, n)
	}
	for n := range revoked {
		if _, ok := active[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	stats := make([]*redis.MapStringStringCmd, len(names))
	held := make([]*redis.IntCmd, len(names))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			stats[i] = p.HGetAll(ctx, KeyPipelineKeyStats(n))
			held[i] = p.SCard(ctx, KeyPipelineKeyJobs(n))
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read pipeline key stats", err)
	}
	out := make([]PipelineKey, len(names))
	for i, n := range names {
		k := PipelineKey{Name: n, PublicKey: active[n], Held: held[i].Val()}
		if _, ok := active[n]; !ok {
			k.Revoked = true
			k.RevokedAt = unixText(revoked[n])
		}
		st := stats[i].Val()
		k.AddedAt = unixText(st["added_at"])
		k.LastSeen = unixText(st["last_seen"])
		k.Refusals, _ = strconv.ParseInt(st["refusals"], 10, 64)
		k.LastRefusal = st["last_refusal"]
		out[i] = k
	}
	return out, nil
}

func unixText(s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(f), 0)
}
