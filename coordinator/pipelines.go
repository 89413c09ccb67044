package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/text"
)

// PipelineNotifierConfig configures the pipeline notifier (see
// doc/protocol.md, Pipelines). Zero values take the defaults of package
// config.
type PipelineNotifierConfig struct {
	// Interval between two comparisons.
	Interval time.Duration
	// SilentAfter is how old a pipeline's `ts` may get before it is
	// announced (once) as silent.
	SilentAfter time.Duration
}

func (c PipelineNotifierConfig) orDefaults() PipelineNotifierConfig {
	orDefault(&c.Interval, config.DefaultPipelineInterval)
	orDefault(&c.SilentAfter, config.DefaultPipelineSilentAfter)
	return c
}

// maxClockSkew is how far ahead of the bot's clock a pipeline's ts may be
// and still count as a time.
const maxClockSkew = 24 * time.Hour

// pipelineNoticeBacklog bounds the lines kept while IRC is down.
const pipelineNoticeBacklog = 200

// PipelineNotifier announces pipelines connecting, disconnecting, changing
// version and going silent, in every channel the bot serves. The first
// successful comparison only records what exists: no announcements for
// pipelines that were there at startup.
type PipelineNotifier struct {
	store *store.Store
	ann   Announcer
	cfg   PipelineNotifierConfig
	log   *slog.Logger
	// Now is the clock the silence limit is measured with.
	Now func() time.Time

	known  map[string]store.PipelineInfo // nil until the first snapshot
	silent map[string]bool               // announced as silent
	badTS  map[string]bool               // announced as reporting a ts that is not a time
	// badKeys are members of `pipelines` already logged as not records.
	badKeys onceLog
	outbox  []pipelineNotice // lines not yet delivered everywhere
}

type pipelineNotice struct {
	text    string
	pending []string // channels still to post in; nil = all
}

// NewPipelineNotifier returns a pipeline notifier; zero config values take
// their defaults.
func NewPipelineNotifier(store *store.Store, ann Announcer, cfg PipelineNotifierConfig, log *slog.Logger) *PipelineNotifier {
	return &PipelineNotifier{
		store: store, ann: ann, cfg: cfg.orDefaults(),
		log: serviceLog(log, "pipeline-notifier"), Now: time.Now,
		silent: map[string]bool{}, badTS: map[string]bool{},
	}
}

// runOnce compares the pipeline records with the previous snapshot, queues
// a line per change and delivers what it can.
func (n *PipelineNotifier) runOnce(ctx context.Context) error {
	cur, bad, err := n.store.PipelineSnapshot(ctx)
	if err != nil {
		return err
	}
	for _, k := range bad {
		if n.badKeys.first(k) {
			n.log.Warn("skipping a member of pipelines that is not a pipeline record", "key", k)
		}
	}
	n.badKeys.endCycle(n.log, "pipelines (not pipeline records)", n.Now())
	now := n.Now()
	for k, p := range cur {
		if p.TS.After(now.Add(maxClockSkew)) {
			p.BadTS, p.TS = strconv.FormatFloat(float64(p.TS.UnixMilli())/1e3, 'f', -1, 64), time.Time{}
		}
		cur[k] = p
	}
	first := n.known == nil
	if !first {
		n.diff(cur)
	}
	// Silence, after the connect/disconnect lines so that a new pipeline is
	// announced before it can be called silent. A ts that is not a time is
	// said once, not turned into an absurd silence.
	for _, k := range sortedKeys(cur) {
		p := cur[k]
		switch {
		case p.BadTS == "":
			delete(n.badTS, k)
		case !n.badTS[k]:
			n.badTS[k] = true
			n.log.Warn("pipeline ts is not a time", "pipeline", k, "ts", p.BadTS)
			if !first {
				n.queue(fmt.Sprintf("Pipeline %q (%s) reports ts=%s, which is not a time; I cannot tell whether it is silent.",
					p.Nickname, p.ID, text.Clean(p.BadTS, text.Untrusted)))
			}
		}
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
	for k := range n.badTS {
		if _, ok := cur[k]; !ok {
			delete(n.badTS, k)
		}
	}
	n.known = cur
	return n.flush(ctx)
}

// diff queues the connect, disconnect and version lines between the last
// snapshot and cur.
func (n *PipelineNotifier) diff(cur map[string]store.PipelineInfo) {
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

func sortedKeys(m map[string]store.PipelineInfo) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
