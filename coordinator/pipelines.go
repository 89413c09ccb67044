package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
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
	// ChangeEvery is the least time between two version-change lines of
	// one pipeline (notifier.pipeline_change_every); changes in between
	// are held back, counted, and summed up in the next line. Negative:
	// no limit.
	ChangeEvery time.Duration
	// Now is the clock the silence limit is measured with (the node's
	// store clock; time.Now when nil).
	Now func() time.Time
}

func (c PipelineNotifierConfig) orDefaults() PipelineNotifierConfig {
	orDefault(&c.Interval, config.DefaultPipelineInterval)
	orDefault(&c.SilentAfter, config.DefaultPipelineSilentAfter)
	if c.ChangeEvery == 0 { // negative: no limit
		c.ChangeEvery = config.DefaultPipelineChangeEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// What a pipeline reports reaches the channel only capped: its nickname
// and id cut to a length, its version only when it looks like one.
const (
	maxNoticeNick = 40
	maxNoticeID   = 48 // "pipeline:" and 32 hex digits is 41
	maxNoticeTS   = 24
)

// versionShape is what a version posted in a channel looks like
// (upstream's are like 20190106.01; v1.2.3-rc1 and git describe output
// pass too).
var versionShape = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+~-]{0,39}$`)

// noticeVersion is v as a pipeline notice shows it.
func noticeVersion(v string) string {
	switch {
	case v == "":
		return "(no version)"
	case versionShape.MatchString(v):
		return v
	}
	return "(unusual version)"
}

// noticeNick and noticeID are a pipeline's nickname and id as a notice
// shows them.
func noticeNick(s string) string { return text.Cut(text.Clean(s, text.Untrusted), maxNoticeNick) }
func noticeID(s string) string   { return text.Cut(text.Clean(s, text.Untrusted), maxNoticeID) }

// changeState is what the notifier keeps of a pipeline's version lines
// (in Redis, KeyPipelineNotices, as JSON).
type changeState struct {
	// At is when its last version line was posted (UNIX seconds).
	At int64 `json:"at"`
	// Said is the version the channel was last told.
	Said string `json:"said"`
	// Held counts the changes not announced since.
	Held int `json:"held"`
	// ConnAt starts the period (ChangeEvery) of its connected and
	// disconnected lines (UNIX seconds), ConnSaid counts those posted in
	// it (at most connBurst), ConnHeld those held back; Nick and ID name
	// it in the line that sums them up, when it may be gone.
	ConnAt   int64  `json:"conn_at,omitempty"`
	ConnSaid int    `json:"conn_said,omitempty"`
	ConnHeld int    `json:"conn_held,omitempty"`
	Nick     string `json:"nick,omitempty"`
	ID       string `json:"id,omitempty"`
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
	store Store
	ann   news.Announcer
	cfg   PipelineNotifierConfig
	log   *slog.Logger

	known  map[string]store.PipelineInfo // nil until the first snapshot
	silent map[string]bool               // announced as silent
	badTS  map[string]bool               // announced as reporting a ts that is not a time
	// badKeys are members of `pipelines` already logged as not records.
	badKeys onceLog
	outbox  []pipelineNotice // lines not yet delivered everywhere
	// changes are the version-line states by pipeline key (loaded from
	// Redis at the first snapshot); dirty are those to write back.
	changes map[string]*changeState
	dirty   map[string]bool
}

type pipelineNotice struct {
	text    string
	pending []string // channels still to post in; nil = all
}

// NewPipelineNotifier returns a pipeline notifier; zero config values take
// their defaults.
func NewPipelineNotifier(st Store, ann news.Announcer, cfg PipelineNotifierConfig, log *slog.Logger) *PipelineNotifier {
	return &PipelineNotifier{
		store: st, ann: ann, cfg: cfg.orDefaults(),
		log:    serviceLog(log, "pipeline-notifier"),
		silent: map[string]bool{}, badTS: map[string]bool{},
		changes: map[string]*changeState{}, dirty: map[string]bool{},
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
	n.badKeys.endCycle(n.log, "pipelines (not pipeline records)", n.cfg.Now())
	now := n.cfg.Now()
	for k, p := range cur {
		if p.TS.After(now.Add(maxClockSkew)) {
			p.BadTS, p.TS = strconv.FormatFloat(float64(p.TS.UnixMilli())/1e3, 'f', -1, 64), time.Time{}
		}
		cur[k] = p
	}
	first := n.known == nil
	if first {
		n.loadChanges(ctx)
	} else {
		n.diff(cur, now)
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
					noticeNick(p.Nickname), noticeID(p.ID), text.Cut(text.Clean(p.BadTS, text.Untrusted), maxNoticeTS)))
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
					noticeNick(p.Nickname), noticeID(p.ID), shortDuration(now.Sub(p.TS))))
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
	n.saveChanges(ctx, cur, now)
	return n.flush(ctx)
}

// diff queues the connect, disconnect and version lines between the last
// snapshot and cur.
func (n *PipelineNotifier) diff(cur map[string]store.PipelineInfo, now time.Time) {
	for _, k := range sortedKeys(n.known) {
		if _, ok := cur[k]; !ok {
			p := n.known[k]
			if ok, more := n.connLine(k, p, now); ok {
				n.queue(fmt.Sprintf("Pipeline %q (%s) disconnected.%s", noticeNick(p.Nickname), noticeID(p.ID), more))
			}
		}
	}
	for _, k := range sortedKeys(cur) {
		p := cur[k]
		old, ok := n.known[k]
		if !ok {
			ok, more := n.connLine(k, p, now)
			if !ok {
				continue
			}
			n.queue(fmt.Sprintf("Pipeline %q (%s, version %s) connected.%s", noticeNick(p.Nickname), noticeID(p.ID), noticeVersion(p.Version), more))
			if st := n.changes[k]; st != nil && st.Said != p.Version {
				st.Said, st.Held = p.Version, 0 // the connect line said it
				n.dirty[k] = true
			}
			continue
		}
		n.version(k, p, old.Version, now)
	}
	n.connSummaries(cur, now)
}

// connBurst is how many connected and disconnected lines one pipeline
// gets per ChangeEvery (two restarts); the rest are held back.
const connBurst = 4

// connLine reports whether pipeline k's connected or disconnected line
// may be posted now: at most connBurst per ChangeEvery per pipeline (a
// key that reports and unregisters in turn would otherwise get a line
// every cycle, about 2 a minute). A line held back is counted, and summed
// up in the next line (more), or by connSummaries once the period has
// passed.
func (n *PipelineNotifier) connLine(k string, p store.PipelineInfo, now time.Time) (ok bool, more string) {
	st := n.changes[k]
	if st == nil {
		st = &changeState{Said: p.Version}
		n.changes[k] = st
	}
	st.Nick, st.ID = p.Nickname, p.ID
	n.dirty[k] = true
	inPeriod := n.cfg.ChangeEvery > 0 && st.ConnAt != 0 && now.Sub(time.Unix(st.ConnAt, 0)) < n.cfg.ChangeEvery
	if inPeriod && st.ConnSaid >= connBurst {
		st.ConnHeld++
		metrics.PipelineNoticeHeld()
		n.log.Info("pipeline connect/disconnect line held back (at most 4 per pipeline per notifier.pipeline_change_every)",
			"pipeline", k, "held", st.ConnHeld, "every", n.cfg.ChangeEvery)
		return false, ""
	}
	if !inPeriod {
		if st.ConnHeld > 0 {
			more = fmt.Sprintf(" (%d connects and disconnects in %s not announced.)", st.ConnHeld, shortDuration(now.Sub(time.Unix(st.ConnAt, 0))))
		}
		st.ConnAt, st.ConnSaid, st.ConnHeld = now.Unix(), 0, 0
	}
	st.ConnSaid++
	return true, more
}

// connSummaries posts, for each pipeline whose connects and disconnects
// were held back and whose ChangeEvery has passed, one line: where it is
// now and how many it sums up.
func (n *PipelineNotifier) connSummaries(cur map[string]store.PipelineInfo, now time.Time) {
	keys := make([]string, 0, len(n.changes))
	for k := range n.changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st := n.changes[k]
		if st.ConnHeld == 0 || now.Sub(time.Unix(st.ConnAt, 0)) < n.cfg.ChangeEvery {
			continue
		}
		state := "is disconnected"
		if p, ok := cur[k]; ok {
			state = fmt.Sprintf("is connected (version %s)", noticeVersion(p.Version))
			st.Said, st.Held = p.Version, 0
		}
		n.queue(fmt.Sprintf("Pipeline %q (%s) %s. (%d connects and disconnects in %s not announced.)", noticeNick(st.Nick), noticeID(st.ID),
			state, st.ConnHeld, shortDuration(now.Sub(time.Unix(st.ConnAt, 0)))))
		st.ConnAt, st.ConnSaid, st.ConnHeld = now.Unix(), 1, 0
		n.dirty[k] = true
	}
}

// version queues the version line of pipeline k (known before as prev)
// when its version changed, at most one per ChangeEvery: a change within
// that time of the last line is held back and counted, and once the time
// has passed the next line (at the next change, or at the next cycle when
// changes were held) says how many changes it sums up.
func (n *PipelineNotifier) version(k string, p store.PipelineInfo, prev string, now time.Time) {
	changed := prev != p.Version
	st := n.changes[k]
	if st == nil {
		if !changed {
			return
		}
		st = &changeState{Said: prev}
		n.changes[k] = st
	}
	limited := n.cfg.ChangeEvery > 0 && st.At != 0 && now.Sub(time.Unix(st.At, 0)) < n.cfg.ChangeEvery
	if changed && limited {
		st.Held++
		n.dirty[k] = true
		metrics.PipelineNoticeHeld()
		n.log.Info("pipeline version change held back (one line per pipeline per notifier.pipeline_change_every)",
			"pipeline", k, "held", st.Held, "every", n.cfg.ChangeEvery)
		return
	}
	if !changed && (st.Held == 0 || limited) {
		return
	}
	changes := st.Held
	if changed {
		changes++
	}
	if st.Said != p.Version {
		line := fmt.Sprintf("Pipeline %q (%s) changed version from %s to %s.", noticeNick(p.Nickname), noticeID(p.ID),
			noticeVersion(st.Said), noticeVersion(p.Version))
		if changes > 1 {
			line += fmt.Sprintf(" (%d changes in %s.)", changes, shortDuration(now.Sub(time.Unix(st.At, 0))))
		}
		n.queue(line)
		st.At = now.Unix()
	}
	st.Said, st.Held = p.Version, 0
	n.dirty[k] = true
}

// loadChanges reads the version-line states a previous run left, so the
// limit holds across restarts. A state that cannot be read is dropped.
func (n *PipelineNotifier) loadChanges(ctx context.Context) {
	m, err := n.store.PipelineNoticeStates(ctx)
	if err != nil {
		n.log.Warn("cannot read the pipeline notice states; starting without them", "err", err)
		return
	}
	for k, v := range m {
		var st changeState
		if json.Unmarshal([]byte(v), &st) == nil {
			n.changes[k] = &st
		}
	}
}

// saveChanges writes the states changed this cycle and forgets those of
// pipelines gone for longer than ChangeEvery (kept that long, a pipeline
// that disconnects and connects again cannot reset its limit).
func (n *PipelineNotifier) saveChanges(ctx context.Context, cur map[string]store.PipelineInfo, now time.Time) {
	var gone []string
	for k, st := range n.changes {
		if _, ok := cur[k]; !ok && st.ConnHeld == 0 && now.Sub(time.Unix(max(st.At, st.ConnAt), 0)) >= n.cfg.ChangeEvery {
			gone = append(gone, k)
			delete(n.changes, k)
			delete(n.dirty, k)
		}
	}
	sort.Strings(gone)
	if err := n.store.ForgetPipelineNoticeStates(ctx, gone...); err != nil {
		n.log.Warn("cannot forget pipeline notice states", "err", err)
	}
	for k := range n.dirty {
		b, _ := json.Marshal(n.changes[k])
		if err := n.store.SetPipelineNoticeState(ctx, k, string(b)); err != nil {
			n.log.Warn("cannot save a pipeline notice state; it is kept in memory", "pipeline", k, "err", err)
			return
		}
		delete(n.dirty, k)
	}
}

func (n *PipelineNotifier) queue(line string) {
	n.log.Info("pipeline notice", "line", line)
	if len(n.outbox) >= pipelineNoticeBacklog {
		n.log.Warn("pipeline notice backlog full, dropping the oldest", "line", n.outbox[0].text)
		n.outbox = n.outbox[1:]
	}
	n.outbox = append(n.outbox, pipelineNotice{text: line})
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
