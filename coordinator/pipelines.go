package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// PipelineNotifierConfig configures the pipeline notifier (SPEC §5.3).
type PipelineNotifierConfig struct {
	// Interval between two comparisons; default 30 s.
	Interval time.Duration
	// SilentAfter is how old a pipeline's `ts` may get before it is
	// announced (once) as silent; default 5 minutes.
	SilentAfter time.Duration
}

func (c PipelineNotifierConfig) withDefaults() PipelineNotifierConfig {
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.SilentAfter <= 0 {
		c.SilentAfter = 5 * time.Minute
	}
	return c
}

// pipelineNoticeBacklog bounds the lines kept while IRC is down.
const pipelineNoticeBacklog = 200

// PipelineNotifier announces pipelines connecting, disconnecting, changing
// version and going silent, in every channel the bot serves. The first
// successful comparison only records what exists: no announcements for
// pipelines that were there at startup.
type PipelineNotifier struct {
	store *Store
	ann   Announcer
	cfg   PipelineNotifierConfig
	log   *slog.Logger
	// Now is the clock the silence limit is measured with.
	Now func() time.Time

	known  map[string]PipelineInfo // nil until the first snapshot
	silent map[string]bool         // announced as silent
	outbox []pipelineNotice        // lines not yet delivered everywhere
}

// PipelineInfo is what the notifier compares of a pipeline record.
type PipelineInfo struct {
	Key, ID, Nickname, Version string
	// TS is the pipeline's last report (its `ts`); zero when unknown.
	TS time.Time
}

type pipelineNotice struct {
	text    string
	pending []string // channels still to post in; nil = all
}

// NewPipelineNotifier returns a pipeline notifier; zero config values take
// their defaults.
func NewPipelineNotifier(store *Store, ann Announcer, cfg PipelineNotifierConfig, log *slog.Logger) *PipelineNotifier {
	if log == nil {
		log = slog.Default()
	}
	return &PipelineNotifier{
		store: store, ann: ann, cfg: cfg.withDefaults(),
		log: log.With("service", "pipeline-notifier"), Now: time.Now,
		silent: map[string]bool{},
	}
}

// PipelineSnapshot reads every pipeline listed in `pipelines` in two round trips
// (SMEMBERS, then one pipelined HMGET per record). Members whose record is
// gone are left out.
func (s *Store) PipelineSnapshot(ctx context.Context) (map[string]PipelineInfo, error) {
	keys, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil {
		return nil, wrap("list pipelines", err)
	}
	out := make(map[string]PipelineInfo, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, "id", "nickname", "version", "ts")
		}
		return nil
	})
	if err != nil {
		return nil, wrap("read pipelines", err)
	}
	for i, k := range keys {
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
		if ts, err := strconv.ParseFloat(str(3), 64); err == nil && ts > 0 {
			info.TS = time.Unix(0, int64(ts*float64(time.Second)))
		}
		out[k] = info
	}
	return out, nil
}

// runOnce compares the pipeline records with the previous snapshot, queues
// a line per change and delivers what it can.
func (n *PipelineNotifier) runOnce(ctx context.Context) error {
	cur, err := n.store.PipelineSnapshot(ctx)
	if err != nil {
		return err
	}
	now := n.Now()
	first := n.known == nil
	if !first {
		n.diff(cur)
	}
	// Silence, after the connect/disconnect lines so that a new pipeline is
	// announced before it can be called silent.
	for _, k := range sortedKeys(cur) {
		p := cur[k]
		quiet := !p.TS.IsZero() && now.Sub(p.TS) > n.cfg.SilentAfter
		switch {
		case !quiet:
			delete(n.silent, k)
		case !n.silent[k]:
			n.silent[k] = true
			if !first {
				n.queue(fmt.Sprintf("Pipeline %q (%s) has not reported for %s; it may have crashed.",
					p.Nickname, p.ID, shortDuration(now.Sub(p.TS))))
			}
		}
	}
	for k := range n.silent {
		if _, ok := cur[k]; !ok {
			delete(n.silent, k)
		}
	}
	n.known = cur
	return n.flush(ctx)
}

// diff queues the connect, disconnect and version lines between the last
// snapshot and cur.
func (n *PipelineNotifier) diff(cur map[string]PipelineInfo) {
	for _, k := range sortedKeys(n.known) {
		if _, ok := cur[k]; !ok {
			p := n.known[k]
			n.queue(fmt.Sprintf("Pipeline %q (%s) disconnected.", p.Nickname, p.ID))
		}
	}
	for _, k := range sortedKeys(cur) {
		p := cur[k]
		old, ok := n.known[k]
		switch {
		case !ok:
			n.queue(fmt.Sprintf("Pipeline %q (%s, version %s) connected.", p.Nickname, p.ID, p.Version))
		case old.Version != p.Version:
			n.queue(fmt.Sprintf("Pipeline %q (%s) changed version from %s to %s.", p.Nickname, p.ID, old.Version, p.Version))
		}
	}
}

func (n *PipelineNotifier) queue(text string) {
	n.log.Info("pipeline notice", "line", text)
	if len(n.outbox) >= pipelineNoticeBacklog {
		n.log.Warn("pipeline notice backlog full, dropping the oldest", "line", n.outbox[0].text)
		n.outbox = n.outbox[1:]
	}
	n.outbox = append(n.outbox, pipelineNotice{text: text})
}

// flush posts the queued lines in every channel, in order. A line stays
// queued, for the channels it has not reached, until Announce succeeds.
func (n *PipelineNotifier) flush(ctx context.Context) error {
	for len(n.outbox) > 0 {
		msg := &n.outbox[0]
		if msg.pending == nil {
			msg.pending = append([]string{}, n.ann.Channels()...)
			if len(msg.pending) == 0 {
				msg.pending = []string{""} // console: Announce prints it
			}
		}
		for len(msg.pending) > 0 {
			if err := announceIn(ctx, n.ann, n.log, msg.pending[0], msg.text); err != nil {
				return fmt.Errorf("announce pipeline notice: %w", err)
			}
			msg.pending = msg.pending[1:]
		}
		n.outbox = n.outbox[1:]
	}
	return nil
}

func sortedKeys(m map[string]PipelineInfo) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
