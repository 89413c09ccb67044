package store

// Pipeline records (pipeline:ID) as the bot, the web and the pipeline
// notifier read them, and the operator's reap-pipeline.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pipelines returns every pipeline record listed in `pipelines`, sorted by
// key; members whose record is gone are left out.
// Round trips: SMEMBERS, then one pipeline of HGETALL.
func (s *Store) Pipelines(ctx context.Context) ([]*Pipeline, error) {
	keys, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !s.wrongTypeSkipped(KeyPipelines, err) {
		return nil, wrap("list pipelines", err)
	}
	slices.Sort(keys)
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGetAll(ctx, k)
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read pipelines", err)
	}
	out := make([]*Pipeline, 0, len(keys))
	for i, k := range keys {
		if m := cmds[i].Val(); len(m) > 0 {
			out = append(out, &Pipeline{Key: k, Fields: m})
		}
	}
	return out, nil
}

// PipelineInfo is what the pipeline notifier compares of a pipeline record.
type PipelineInfo struct {
	Key, ID, Nickname, Version string
	// TS is the pipeline's last report (its `ts`); zero when unknown.
	TS time.Time
	// BadTS holds the `ts` field as written when it is not a time (not a
	// number, NaN, infinite, negative, or beyond year 9999); TS is zero
	// then.
	BadTS string
}

// PipelineSnapshot reads every pipeline listed in `pipelines` in two round
// trips (SMEMBERS, then one pipelined HMGET per record). Members whose
// record is gone are left out; members whose key is not a hash are left
// out and returned in bad, for the caller to log.
func (s *Store) PipelineSnapshot(ctx context.Context) (pipelines map[string]PipelineInfo, bad []string, err error) {
	keys, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !s.wrongTypeSkipped(KeyPipelines, err) {
		return nil, nil, wrap("list pipelines", err)
	}
	out := make(map[string]PipelineInfo, len(keys))
	if len(keys) == 0 {
		return out, nil, nil
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, "id", "nickname", "version", "ts")
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read pipelines", err)
	}
	for i, k := range keys {
		if isWrongType(cmds[i].Err()) {
			bad = append(bad, k)
			continue
		}
		v := cmds[i].Val()
		str := func(j int) string {
			if j < len(v) {
				s, _ := v[j].(string)
				return s
			}
			return ""
		}
		if str(0) == "" && str(1) == "" && str(2) == "" && str(3) == "" {
			continue // listed, but the record is gone
		}
		info := PipelineInfo{Key: k, ID: str(0), Nickname: str(1), Version: str(2)}
		if info.ID == "" {
			info.ID = k
		}
		info.TS, info.BadTS = parseTS(str(3))
		out[k] = info
	}
	return out, bad, nil
}

// parseTS reads a pipeline's ts (UNIX seconds, maybe with a fraction).
// Empty or zero is "unknown"; anything that is not a time is returned as
// bad.
func parseTS(raw string) (time.Time, string) {
	if raw == "" {
		return time.Time{}, ""
	}
	ts, err := strconv.ParseFloat(raw, 64)
	switch {
	case err != nil, ts != ts, ts < 0, ts > maxTS:
		return time.Time{}, raw
	case ts == 0:
		return time.Time{}, ""
	}
	sec := int64(ts)
	return time.Unix(sec, int64((ts-float64(sec))*1e9)), ""
}

// maxTS is 9999-12-31 as UNIX seconds: later values are not times, and
// would overflow a time.Duration.
const maxTS = 253402300799

// RemovePipeline deletes a pipeline record that stopped reporting and its
// member of `pipelines`, unless it reported within silentAfter
// (pipeline_remove.lua), or whatever its last report with force. It
// reports whether it removed anything; a pipeline that reports again is
// refused with *PipelineAliveError.
func (s *Store) RemovePipeline(ctx context.Context, key string, silentAfter time.Duration, force bool) (bool, error) {
	after := int64(silentAfter / time.Second)
	if force {
		after = -1
	}
	res, err := pipelineRemoveScript.Run(ctx, s.rdb, []string{key, KeyPipelines}, s.Now().Unix(), after).Slice()
	if err != nil {
		return false, wrap("remove pipeline "+key, err)
	}
	code, _ := res[0].(int64)
	switch code {
	case -5:
		ts, _ := res[1].(string)
		sec, _ := strconv.ParseFloat(ts, 64)
		return false, &PipelineAliveError{Pipeline: key, TS: time.Unix(int64(sec), 0)}
	case -3:
		return false, fmt.Errorf("remove pipeline %s: %w", key, ErrWrongType)
	}
	return code == 1, nil
}

// Pipeline is a pipeline record (doc/protocol.md, Pipelines).
type Pipeline struct {
	Key    string
	Fields map[string]string
}

// Nickname is the pipeline's nickname.
func (p *Pipeline) Nickname() string { return p.Fields["nickname"] }

// GetPipeline reads the pipeline record at key; nil, nil when there is none.
func (s *Store) GetPipeline(ctx context.Context, key string) (*Pipeline, error) {
	if !strings.HasPrefix(key, PipelinePrefix) {
		return nil, nil
	}
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, wrap("get pipeline "+key, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return &Pipeline{Key: key, Fields: m}, nil
}

// PipelineNoticeStates reads the pipeline notifier's states
// (KeyPipelineNotices): pipeline key → state. A key of another type reads
// as empty (and is counted as such).
func (s *Store) PipelineNoticeStates(ctx context.Context) (map[string]string, error) {
	m, err := s.rdb.HGetAll(ctx, KeyPipelineNotices).Result()
	if err != nil && !s.wrongTypeSkipped(KeyPipelineNotices, err) {
		return nil, wrap("read pipeline notice states", err)
	}
	return m, nil
}

// SetPipelineNoticeState writes the notifier's state of pipeline key.
func (s *Store) SetPipelineNoticeState(ctx context.Context, key, state string) error {
	return wrap("write pipeline notice state", s.rdb.HSet(ctx, KeyPipelineNotices, key, state).Err())
}

// ForgetPipelineNoticeStates removes the notifier's states of keys.
func (s *Store) ForgetPipelineNoticeStates(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	return wrap("forget pipeline notice states", s.rdb.HDel(ctx, KeyPipelineNotices, keys...).Err())
}
