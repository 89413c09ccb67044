package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/robfig/cron/v3"
)

// ServicesConfig holds the settings of the background services (SPEC
// §5.1–5.4). Zero values take the defaults given on each field.
type ServicesConfig struct {
	Reaper    ReaperConfig
	Finish    FinishConfig
	Pipelines PipelineNotifierConfig
	Analyzer  AnalyzerConfig
}

// Services runs the coordinator's background services inside the bot:
// the reaper, the finish and pipeline notifiers and the analyzer sweep on
// robfig/cron schedules, plus the `updates` listener feeding the analyzer
// (and whoever else registers with Updates.OnUpdate before Start).
//
// A cycle that is still running when its next tick comes is skipped, never
// run twice at once; a panicking cycle is logged and the schedule goes on.
type Services struct {
	Reaper    *Reaper
	Finish    *FinishNotifier
	Pipelines *PipelineNotifier
	Analyzer  *Analyzer
	Updates   *Updates

	log    *slog.Logger
	cron   *cron.Cron
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewServices builds the services over store; ann receives their lines.
func NewServices(store *Store, ann Announcer, cfg ServicesConfig, log *slog.Logger) *Services {
	if log == nil {
		log = slog.Default()
	}
	s := &Services{
		Reaper:    NewReaper(store, ann, cfg.Reaper, log),
		Finish:    NewFinishNotifier(store, ann, cfg.Finish, log),
		Pipelines: NewPipelineNotifier(store, ann, cfg.Pipelines, log),
		Analyzer:  NewAnalyzer(store, cfg.Analyzer, log),
		Updates:   NewUpdates(store.rdb, log),
		log:       log,
	}
	s.Updates.OnUpdate(s.Analyzer.Notify)
	s.Finish.onNotice = s.Analyzer.Notify
	// Messages published while the subscription was down are lost: catch
	// up on every working job each time it is (re)established.
	s.Updates.OnSubscribe(func(ctx context.Context) {
		s.goSafe("analyzer catch-up", func() {
			if err := s.Analyzer.runOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("analyzer catch-up sweep failed", "service", "analyzer", "err", err)
			}
		})
	})
	return s
}

// Start takes the pipeline notifier's startup snapshot (so pipelines that
// exist now are not announced), delivers finish notices left by an
// earlier run, and starts the schedules, the `updates` listener and the
// analyzer. It returns at once; Stop ends everything.
func (s *Services) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	if err := s.Pipelines.runOnce(ctx); err != nil {
		s.log.Warn("pipeline snapshot at startup failed; the first successful one is the baseline",
			"service", "pipeline-notifier", "err", err)
	}
	clog := cronLogger{s.log}
	s.cron = cron.New(cron.WithLogger(clog))
	add := func(name string, interval time.Duration, runOnce func(context.Context) error, now bool) {
		var failing bool // log a failing service once, not every cycle
		metrics.RegisterService(name, interval)
		job := cron.NewChain(cron.Recover(clog), cron.SkipIfStillRunning(clog)).Then(cron.FuncJob(func() {
			start := time.Now()
			err := runOnce(ctx)
			if ctx.Err() == nil {
				metrics.ServiceCycle(name, start, err)
			}
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				failing = true
				s.log.Warn("cycle failed", "service", name, "err", err)
			case err == nil && failing:
				failing = false
				s.log.Info("cycle succeeded again", "service", name)
			}
		}))
		s.cron.Schedule(every(interval), job)
		if now {
			s.goSafe(name, job.Run)
		}
	}
	add("reaper", s.Reaper.cfg.Interval, s.Reaper.runOnce, false)
	add("finish-notifier", s.Finish.cfg.Interval, s.Finish.runOnce, true)
	add("pipeline-notifier", s.Pipelines.cfg.Interval, s.Pipelines.runOnce, false)
	add("analyzer-sweep", s.Analyzer.cfg.SweepInterval, s.Analyzer.runOnce, false)
	s.cron.Start()
	s.goSafe("updates listener", func() { s.Updates.Run(ctx) })
	s.goSafe("analyzer", func() { s.Analyzer.work(ctx) })
}

// Stop ends the services and waits for running cycles. A finish notice
// whose line was not sent stays in Redis for the next start.
func (s *Services) Stop() {
	s.once.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		<-s.cron.Stop().Done()
		s.wg.Wait()
	})
}

func (s *Services) goSafe(what string, fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		guarded(s.log, what, fn)
	}()
}

// every is a cron schedule firing every d (cron.Every rounds to seconds).
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// cronLogger routes robfig/cron's errors (recovered panics) to slog; its
// info messages (every tick of every schedule) are dropped.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(string, ...any) {}
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}

// announceIn posts text (made safe for one IRC line: the one place the
// services clean text from Redis) in channel, or in every channel the bot serves
// when the job has none (it was queued from the console). Lines nobody can
// receive (ErrCannotDeliver) are logged and count as delivered; any other
// error means the line must be kept for a later attempt.
func announceIn(ctx context.Context, ann Announcer, log *slog.Logger, channel, text string) error {
	text = cleanLine(text)
	targets := []string{channel}
	if channel == "" {
		if chs := ann.Channels(); len(chs) > 0 {
			targets = chs
		}
	}
	for _, ch := range targets {
		err := ann.Announce(ctx, ch, text)
		if errors.Is(err, ErrCannotDeliver) {
			log.Warn("cannot deliver line, dropping it", "channel", ch, "line", text, "err", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// cleanLine removes what would end or corrupt an IRC line: text from Redis
// is written by pipelines and users.
func cleanLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\x00") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\r', '\n':
			return ' '
		case 0:
			return -1
		}
		return r
	}, s)
}

// shortDuration writes d to the second, without a trailing "0s" when it is
// a whole number of minutes ("2h0m", "5m", "42s").
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	if d >= time.Minute && strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	return s
}

// guarded runs fn, logging instead of crashing the process when it panics.
func guarded(log *slog.Logger, what string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic", "in", what, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	fn()
}
