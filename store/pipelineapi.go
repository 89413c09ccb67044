package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/redis/go-redis/v9"
)

// apiCtx gives the pipeline API's writes the fence of user commands when
// the caller's context carries none: a node that lost the lease refuses
// them (HTTP requests' contexts come from the server, not the term).
func (s *Store) apiCtx(ctx context.Context) context.Context {
	if fenceToken(ctx) == "" && s.commandFence != nil {
		return WithFence(ctx, s.commandFence())
	}
	return ctx
}

// PipelineKeys reads every key's public key and revocation: one round
// trip (two HGETALL). The API refreshes it every 250 ms.
func (s *Store) PipelineKeys(ctx context.Context) (active map[string]string, revoked map[string]string, err error) {
	var a, r *redis.MapStringStringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		a = p.HGetAll(ctx, KeyPipelineKeys)
		r = p.HGetAll(ctx, KeyPipelineKeysRevoked)
		return nil
	})
	if err != nil {
		return nil, nil, wrap("read pipeline keys", err)
	}
	return a.Val(), r.Val(), nil
}

// NonceResult is what CheckNonce found.
type NonceResult int

const (
	NonceRecorded NonceResult = 1
	NonceReplayed NonceResult = 0
	NonceTooMany  NonceResult = -1
)

// CheckNonce records a verified request's nonce for window (refused as
// replayed if already there); at most max per key. Nonces older than
// window before the request's timestamp ts are pruned (by ts, not by this
// node's clock: see api_nonce.lua).
func (s *Store) CheckNonce(ctx context.Context, name, nonce string, ts int64, window time.Duration, max int) (NonceResult, error) {
	n, err := apiNonceScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyPipelineKeyNonces(name)},
		nonce, ts, int64(window/time.Second), max).Int64()
	if err != nil {
		return 0, wrap("check nonce", err)
	}
	return NonceResult(n), nil
}

// APIJob is a job held through the pipeline API: its record, decoded by
// DecodeJob as every reader of the record does (Record.Fields is the hash
// as read, which the take answers byte for byte), and its ignores.
type APIJob struct {
	Ident   string
	Queue   string
	Record  *record.Job
	Ignores []string
	// Replayed: the take's take_id had already taken this job, which the
	// key still holds; it was answered again and nothing was taken.
	Replayed bool
	// Pos is where the take landed in the replication stream (zero
	// unless the store was made WithPositions).
	Pos ReplPos
}

// How long, and how many, take_ids a key's takes are remembered
// (doc/pipeline-api.md, A lost answer). A client retries a take whose
// answer it lost within seconds (the client's own retry: about two
// seconds), at most a couple of minutes (the bridge's RetryFor, 2 min by
// default), so ten minutes is a wide margin; the cap bounds the memory
// of a key that takes without end (about a hundred bytes an entry, in
// two keys), and is far above the takes one key makes within a client's
// retry horizon. Past either bound a retry takes anew, as before take_ids
// (the job it lost is failed by the reaper, reported).
const (
	TakeIDTTL = 10 * time.Minute
	TakeIDCap = 1000
)

// ErrKeyRevoked: the take's key is no longer registered with the public
// key the request was verified with (revoked or replaced); nothing was
// taken.
var ErrKeyRevoked = errors.New("the pipeline key was revoked or replaced")

// APITake takes a job for key name from queues under the take rule
// (doc/pipeline-api.md, The take rule; scripts/take.lua): paused queues
// give nothing, then the per-user running limit, the key's avoid rules and
// its targeted-only flag skip jobs, then the queues are tried in the order
// given. The job taken is moved to working, started_at and pipeline_id
// written, the ident added to the key's held set and published on
// `updates` (what a direct pipeline's first log entry publishes, which
// the start notifier, the history and the tweeter react to), in one
// script, which first checks that name is still registered with the
// public key pub (the stored text) and else takes nothing
// (ErrKeyRevoked); then the ignore set is read. Nil when no job could be
// taken. The rules are the ones SetTakeRules set.
func (s *Store) APITake(ctx context.Context, name, pub string, queues []string) (*APIJob, error) {
	j, _, err := s.APITakeStats(ctx, name, pub, queues)
	return j, err
}

// APITakeStats is APITake that also says what the scan saw.
func (s *Store) APITakeStats(ctx context.Context, name, pub string, queues []string) (*APIJob, TakeStats, error) {
	return s.apiTake(ctx, name, pub, "", queues)
}

// APITakeID is APITake with an idempotency key, takeID (wire.ValidTakeID;
// "" for none): a take whose takeID already took a job the key still
// holds answers that job again (APIJob.Replayed) and takes nothing, so a
// pipeline that lost a take's answer gets the job on its retry instead of
// leaving it held by nobody (doc/pipeline-api.md, A lost answer). The
// takeID and its job are remembered for TakeIDTTL, at most TakeIDCap per
// key, in the take's one script.
func (s *Store) APITakeID(ctx context.Context, name, pub, takeID string, queues []string) (*APIJob, error) {
	j, _, err := s.apiTake(ctx, name, pub, takeID, queues)
	return j, err
}

func (s *Store) apiTake(ctx context.Context, name, pub, takeID string, queues []string) (*APIJob, TakeStats, error) {
	var st TakeStats
	r := s.rules()
	scan := r.ScanLimit
	if scan <= 0 {
		scan = DefaultTakeScanLimit
	}
	cm := r.CaseMapping
	if cm == "" {
		cm = "rfc1459"
	}
	exempt := "0"
	if r.OpsExempt {
		exempt = "1"
	}
	keys := append([]string{KeyWorking, KeyPipelineKeyJobs(name), KeyPipelineKeys, KeyPaused,
		KeyPipelineKeyRules(name), KeyPipelineKeyAvoid(name), KeyPipelineKeyAvoidSelf(name),
		KeyPipelineKeyTakeIDs(name), KeyPipelineKeyTakeIDsAt(name)}, queues...)
	now := s.Now()
	started := strconv.FormatFloat(float64(now.UnixNano())/1e9, 'f', 6, 64)
	run, pos := s.runNoting(s.apiCtx(ctx), apiTakeScript, keys, started, APIPipelineKey(name), name, pub, ChannelUpdates,
		r.PerUserRunning, exempt, cm, scan, takeID, int64(TakeIDTTL/time.Second), cmp.Or(s.takeIDCap, TakeIDCap))
	res, err := run.Slice()
	if err != nil {
		return nil, st, wrap("take", err)
	}
	if len(res) == 1 {
		return nil, st, ErrKeyRevoked
	}
	if len(res) < 3 {
		return nil, st, fmt.Errorf("take: unexpected reply %v", res)
	}
	hit, _ := res[1].(int64)
	skipped, _ := res[2].(int64)
	st = TakeStats{BoundHit: hit == 1, Skipped: int(skipped)}
	metrics.TakeScanned(st.BoundHit, st.Skipped)
	if len(res) < 5 {
		return nil, st, nil
	}
	j := &APIJob{Pos: pos}
	j.Replayed = res[0] == "replay"
	j.Queue, _ = res[3].(string)
	j.Ident, _ = res[4].(string)
	fields := make(map[string]string, len(res)/2)
	for i := 5; i+1 < len(res); i += 2 {
		k, _ := res[i].(string)
		v, _ := res[i+1].(string)
		fields[k] = v
	}
	j.Record = record.DecodeJob(j.Ident, fields)
	ig, err := s.rdb.SMembers(ctx, ignoresKey(j.Ident, fields)).Result()
	if err != nil && !isWrongType(err) {
		return j, st, wrap("read ignores", err)
	}
	sort.Strings(ig)
	j.Ignores = ig
	return j, st, nil
}

func ignoresKey(ident string, fields map[string]string) string {
	if k := fields["ignore_patterns_set_key"]; k != "" {
		return k
	}
	return KeyIgnores(ident)
}

// APIReadJob reads a job's record and ignore set (one round trip, then
// the ignores when the record names another set). Nil when the record is
// gone or is a ghost (Job.Ghost); a *NotAJobError when the key is not a hash.
func (s *Store) APIReadJob(ctx context.Context, ident string) (*APIJob, error) {
	var h *redis.MapStringStringCmd
	var ig *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, KeyJob(ident))
		ig = p.SMembers(ctx, KeyIgnores(ident))
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read job", err)
	}
	if isWrongType(h.Err()) {
		return nil, &NotAJobError{Key: ident}
	}
	rec := record.DecodeJob(ident, h.Val())
	if len(h.Val()) == 0 || rec.Ghost() {
		return nil, nil // gone, or a ghost: no job
	}
	j := &APIJob{Ident: ident, Record: rec, Ignores: ig.Val()}
	if k := ignoresKey(ident, rec.Fields); k != KeyIgnores(ident) {
		if j.Ignores, err = s.rdb.SMembers(ctx, k).Result(); err != nil && !isWrongType(err) {
			return nil, wrap("read ignores", err)
		}
	}
	sort.Strings(j.Ignores)
	return j, nil
}

// APIHeldJobs lists the idents in name's held set.
func (s *Store) APIHeldJobs(ctx context.Context, name string) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, KeyPipelineKeyJobs(name)).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("read held jobs", err)
	}
	sort.Strings(ids)
	return ids, nil
}

// NotHeldError says a key does not hold the job; nothing was written.
type NotHeldError struct{ Ident, Why string }

func (e *NotHeldError) Error() string { return "job " + e.Ident + " is not held by this key: " + e.Why }

func heldResult(op, ident string, res []any, err error) (int64, error) {
	if err != nil {
		return 0, wrap(op, err)
	}
	code, _ := res[0].(int64)
	if code == 0 {
		why, _ := res[1].(string)
		return 0, &NotHeldError{Ident: ident, Why: why}
	}
	switch v := res[1].(type) {
	case int64:
		return v, nil
	}
	return 0, nil
}

// APIUpdate writes a held job's batched increments and fields in one
// script, or nothing when name no longer holds it (*NotHeldError).
func (s *Store) APIUpdate(ctx context.Context, name, ident string, incr map[string]int64, set map[string]string) error {
	args := []any{APIPipelineKey(name), len(incr)}
	for _, k := range apiSortedKeys(incr) {
		args = append(args, k, incr[k])
	}
	args = append(args, len(set))
	for _, k := range apiSortedKeys(set) {
		args = append(args, k, set[k])
	}
	res, err := apiUpdateScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyJob(ident), KeyPipelineKeyJobs(name)}, args...).Slice()
	_, err = heldResult("update job", ident, res, err)
	return err
}

func apiSortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// APIAbort is upstream's MARK_ABORTED for a job name holds.
func (s *Store) APIAbort(ctx context.Context, name, ident string) error {
	res, err := apiAbortScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyJob(ident), KeyPipelineKeyJobs(name)},
		APIPipelineKey(name), ChannelUpdates).Slice()
	_, err = heldResult("abort job", ident, res, err)
	return err
}

// APIAbortedExpiry is how long an aborted job's keys live after done (as
// upstream's MARK_DONE).
const APIAbortedExpiry = 5 * time.Second

// APICompletedExpiry is how long a completed job's keys live (48 h).
const APICompletedExpiry = 48 * time.Hour

// APIDone is upstream's MARK_DONE for a job name holds; it reports whether
// the job counted as aborted.
func (s *Store) APIDone(ctx context.Context, name, ident string) (aborted bool, err error) {
	keys := []string{KeyJob(ident), KeyPipelineKeyJobs(name), KeyLog(ident), KeyIgnores(ident),
		KeyWorking, KeyJobsAborted, KeyJobsCompleted, KeyFinishNotifications}
	res, err := apiDoneScript.Run(s.apiCtx(ctx), s.rdb, keys, APIPipelineKey(name), ChannelUpdates,
		s.Now().Unix(), int64(APICompletedExpiry/time.Second), int64(APIAbortedExpiry/time.Second)).Slice()
	a, err := heldResult("finish job", ident, res, err)
	return a == 1, err
}

// APIReport writes name's pipeline record (fields as given; the caller
// adds the identity fields), SADD pipelines, PUBLISH pipeline_updates.
func (s *Store) APIReport(ctx context.Context, name string, fields map[string]string) error {
	args := []any{ChannelPipelineUpdates, "1"}
	for _, k := range apiSortedKeys(fields) {
		args = append(args, k, fields[k])
	}
	err := apiReportScript.Run(s.apiCtx(ctx), s.rdb, []string{APIPipelineKey(name), KeyPipelines}, args...).Err()
	return wrap("pipeline report", err)
}

// APIUnregister deletes name's pipeline record and its member of
// pipelines, and publishes.
func (s *Store) APIUnregister(ctx context.Context, name string) error {
	err := apiReportScript.Run(s.apiCtx(ctx), s.rdb, []string{APIPipelineKey(name), KeyPipelines}, ChannelPipelineUpdates, "0").Err()
	return wrap("pipeline unregister", err)
}

// APIKeyStats adds to a key's statistics (batched by the caller).
func (s *Store) APIKeyStats(ctx context.Context, name string, lastSeen time.Time, refusals int64, lastRefusal string) error {
	seen := ""
	if !lastSeen.IsZero() {
		seen = strconv.FormatInt(lastSeen.Unix(), 10)
	}
	err := apiKeyStatsScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyPipelineKeyStats(name)}, seen, refusals, lastRefusal).Err()
	return wrap("pipeline key stats", err)
}

// ListenJobSettings follows every job's settings channel
// (archivebot:job:IDENT, doc/protocol.md, Job settings) with one pattern
// subscription and calls onMessage with the ident and the published age,
// until the connection fails or ctx ends. It reports whether the
// subscription was established.
func (s *Store) ListenJobSettings(ctx context.Context, onSubscribed func(), onMessage func(ident, age string)) (bool, error) {
	prefix := ChannelJob("")
	return s.follow(ctx, true, ChannelJob("*"), onSubscribed, func(m *redis.Message) {
		if strings.HasPrefix(m.Channel, prefix) {
			onMessage(strings.TrimPrefix(m.Channel, prefix), m.Payload)
		}
	})
}
