package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// AnalyzerConfig configures the log analyzer and trimmer (see
// doc/protocol.md, Job logs). Zero values take the defaults of package
// config.
type AnalyzerConfig struct {
	// SweepInterval between two passes over `working`, which catch jobs
	// whose `updates` messages were lost.
	SweepInterval time.Duration
	// TrimAfter: consumed log entries are trimmed once more than this
	// many are present.
	TrimAfter int
	// RespectBroadcast trims only up to min(analyzed,
	// last_broadcasted_log_entry), for a running dashboard firehose.
	RespectBroadcast bool
	// StreamMaxLag bounds RespectBroadcast: when the stream lags more than
	// this many entries of one job, the trimmer trims anyway and counts
	// what the stream skipped (0: no bound).
	StreamMaxLag int
	// Batch is the most entries one atomic step reads.
	Batch int
	// Debounce is how long the analyzer lets `updates` messages pile up
	// before it reads the logs they announce (negative: not at all).
	// Pipelines publish on every log entry: this turns hundreds of
	// messages into one script per job.
	Debounce time.Duration
}

func (c AnalyzerConfig) orDefaults() AnalyzerConfig {
	orDefault(&c.SweepInterval, config.DefaultAnalyzerSweepInterval)
	orDefault(&c.TrimAfter, config.DefaultAnalyzerTrimAfter)
	orDefault(&c.Batch, config.DefaultAnalyzerBatch)
	if c.Debounce == 0 {
		c.Debounce = config.DefaultAnalyzerDebounce
	}
	c.Debounce = max(c.Debounce, 0)
	return c
}

// AnalyzeResult is what one Analyze call did to a job.
type AnalyzeResult struct {
	// Entries read, and Invalid ones among them (not JSON, or a bare JSON
	// scalar).
	Entries, Invalid int64
	// Counts added to the job.
	Counts record.LogCounts
	// Bookmark is last_analyzed_log_entry afterwards.
	Bookmark int64
	// Trimmed entries were removed, up to score TrimmedTo.
	Trimmed, TrimmedTo int64
	// StreamSkipped entries were trimmed before the live stream broadcast
	// them (it lagged more than AnalyzerConfig.StreamMaxLag).
	StreamSkipped int64
	// Missing is true when the job record does not exist.
	Missing bool
}

// Analyzer counts response codes in job logs and trims what it consumed.
// Counting a batch and moving the bookmark are one atomic step, so a crash
// can neither lose nor double-count entries (see Analyze).
type Analyzer struct {
	store Store
	cfg   AnalyzerConfig
	log   *slog.Logger

	notified *wakeSet // jobs to analyze soon

	badKeys *badkeys.Summary // members of working that are not jobs

	// analyzed, when set (tests), is called after each job analysis the
	// worker or the sweep did.
	analyzed func(ident string, res AnalyzeResult, err error)
}

// NewAnalyzer returns an analyzer; zero config values take defaults.
func NewAnalyzer(st Store, cfg AnalyzerConfig, log *slog.Logger) *Analyzer {
	return &Analyzer{
		store: st, cfg: cfg.orDefaults(), log: serviceLog(log, "analyzer"),
		notified: newWakeSet(),
		badKeys:  workingSummary("analyzer", "not jobs: not analyzed"),
	}
}

// analyzeConflicts bounds how often one Analyze call re-reads a batch
// because another analyzer moved the bookmark first.
const analyzeConflicts = 10

// Analyze reads every log entry of ident past its bookmark, batch by
// batch, adds the counts to the job and trims consumed entries.
//
// Each batch is read with plain reads (the bookmark, then the entries past
// it), decoded and counted here, and committed with CommitLogCounts, which
// adds the counts and moves the bookmark only if the bookmark is still the
// one the batch was read from: atomic, so a crash or a second analyzer can
// neither lose nor double-count entries. Decoding in Go
// rather than in Lua keeps the embedded miniredis, whose Lua runs in Go,
// from being locked for the length of a batch. The next batch is read
// while this one is decoded and committed (readAhead): Redis and the node
// work at once.
func (a *Analyzer) Analyze(ctx context.Context, ident string) (AnalyzeResult, error) {
	var total AnalyzeResult
	bookmark, ok, err := a.store.LogBookmark(ctx, ident)
	if err != nil || !ok {
		total.Missing = !ok
		return total, err
	}
	reads := a.readAhead(ctx, ident, bookmark)
	defer func() { reads.stop() }()
	for conflicts := 0; ; {
		r, ok := <-reads.out
		if !ok { // ctx ended, or the reader panicked
			if err := ctx.Err(); err != nil {
				return total, err
			}
			return total, fmt.Errorf("count log of %s: the log reader stopped", ident)
		}
		if r.err != nil {
			return total, r.err
		}
		b := record.CountEntries(r.batch.Entries())
		next := bookmark
		if b.Entries > 0 {
			next = strconv.FormatFloat(b.Last, 'f', -1, 64)
		}
		res, trim, err := a.store.CommitLogCounts(ctx, ident, bookmark, next, b.Counts,
			a.cfg.TrimAfter, a.cfg.RespectBroadcast, a.cfg.StreamMaxLag)
		if err != nil {
			return total, err
		}
		switch res {
		case store.LogJobGone:
			total.Missing = true
			return total, nil
		case store.LogBookmarkMoved: // another analyzer got there first: start from its bookmark
			reads.stop()
			if conflicts++; conflicts > analyzeConflicts {
				return total, fmt.Errorf("count log of %s: bookmark keeps moving", ident)
			}
			if bookmark, ok, err = a.store.LogBookmark(ctx, ident); err != nil || !ok {
				total.Missing = !ok
				return total, err
			}
			reads = a.readAhead(ctx, ident, bookmark)
			continue
		}
		bookmark = next
		total.Entries += b.Entries
		metrics.LogEntriesAnalyzed(int(b.Entries))
		total.Invalid += b.Invalid
		total.Counts.Add(b.Counts)
		total.Bookmark, _ = strconv.ParseInt(next, 10, 64)
		if trim.Trimmed > 0 {
			total.Trimmed += trim.Trimmed
			total.TrimmedTo = trim.To
		}
		if trim.Skipped > 0 {
			total.StreamSkipped += trim.Skipped
			metrics.StreamSkipped(int(trim.Skipped))
		}
		if b.Entries < int64(a.cfg.Batch) {
			break
		}
	}
	if total.Invalid > 0 {
		a.log.Warn("skipped log entries that are not JSON", "ident", ident, "invalid", total.Invalid)
	}
	if total.StreamSkipped > 0 {
		a.log.Warn("live stream lags too far behind: trimmed log entries it had not sent", "ident", ident,
			"skipped", total.StreamSkipped, "max_lag", a.cfg.StreamMaxLag)
	}
	if total.Trimmed > 0 {
		a.log.Debug("trimmed log", "ident", ident, "entries", total.Trimmed, "upto", total.TrimmedTo)
	}
	return total, nil
}

// logReads reads a job's log batch after batch, one batch ahead of the
// counting, until a batch is short (the end of the log) or a read fails.
type logReads struct {
	out    chan logRead // closed when the reader ends
	cancel context.CancelFunc
}

type logRead struct {
	batch store.LogBatch
	err   error
}

// readAhead starts reading ident's log past from. At most two batches
// wait: the one sent and the one being read.
func (a *Analyzer) readAhead(ctx context.Context, ident, from string) *logReads {
	ctx, cancel := context.WithCancel(ctx)
	r := &logReads{out: make(chan logRead, 1), cancel: cancel}
	go func() {
		defer close(r.out) // also after a panic: Analyze then ends
		run.Guard(a.log, "analyzer read-ahead", func() {
			for {
				b, err := a.store.ReadLogBatch(ctx, ident, from, a.cfg.Batch)
				select {
				case r.out <- logRead{b, err}:
				case <-ctx.Done():
					return
				}
				if err != nil || b.Len() < a.cfg.Batch {
					return
				}
				from = strconv.FormatFloat(b.LastScore(), 'f', -1, 64)
			}
		})
	}()
	return r
}

// stop ends the reader and waits for it.
func (r *logReads) stop() {
	r.cancel()
	for range r.out {
	}
}

// Notify asks for ident's log to be analyzed soon. It never blocks: the
// `updates` listener calls it on every message.
func (a *Analyzer) Notify(_ context.Context, ident string) {
	a.notified.add(ident)
}

// work analyzes notified jobs until ctx ends.
func (a *Analyzer) work(ctx context.Context) {
	for a.notified.wait(ctx) {
		if a.cfg.Debounce > 0 {
			t := time.NewTimer(a.cfg.Debounce)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		for ident := range a.notified.take() {
			if ctx.Err() != nil {
				return
			}
			a.analyzeLogged(ctx, ident)
		}
	}
}

func (a *Analyzer) analyzeLogged(ctx context.Context, ident string) error {
	res, err := a.Analyze(ctx, ident)
	var naj *store.NotAJobError
	if errors.As(err, &naj) {
		// Another program's key: skip it; the sweep's summary says so.
		a.badKeys.Add(ident)
		err = nil
	}
	if err != nil && ctx.Err() == nil {
		a.log.Error("analyze failed", "ident", ident, "err", err)
	}
	if a.analyzed != nil {
		a.analyzed(ident, res, err)
	}
	return err
}

// runOnce is the sweep: analyze every job in `working`, so that counts
// stay right when pub/sub messages were lost.
func (a *Analyzer) runOnce(ctx context.Context) error {
	idents, err := a.store.WorkingJobs(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	var firstErr error
	for _, ident := range idents {
		if err := a.analyzeLogged(ctx, ident); err != nil && firstErr == nil {
			firstErr = err
			if store.IsUnavailable(err) {
				return err
			}
		}
	}
	a.badKeys.End(a.log, time.Now())
	return firstErr
}
