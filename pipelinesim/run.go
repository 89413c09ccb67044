package pipelinesim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
)

// RunOptions shape an autonomous run (Pipeline.Run).
type RunOptions struct {
	// ReportInterval between two reports; default 1 s.
	ReportInterval time.Duration
	// HeartbeatInterval between two heartbeats of the running job; default 1 s.
	HeartbeatInterval time.Duration
	// PollInterval between two looks at the queues while idle; default 1 s.
	PollInterval time.Duration
	// EntryInterval between two log entries; default 100 ms.
	EntryInterval time.Duration
	// Entries is the number of download log entries per job; default 20.
	Entries int
	// Codes are the response codes entries cycle through; default
	// 200, 200, 200, 301, 404, 500.
	Codes []int
	// InvalidEvery: every Nth entry is not JSON (0: never).
	InvalidEvery int
	// IgnoreEvery: every Nth entry is an ignore entry (0: never).
	IgnoreEvery int
	// MaxJobs: exit cleanly after this many jobs (0: run until ctx ends).
	MaxJobs int
	// CrashAfter: crash after this many log entries in total, in the middle
	// of a job (0: never).
	CrashAfter int
	// OnEvent, when set, is told about every step (tests wait on it).
	OnEvent func(Event)
	// Resume names jobs this pipeline already holds when Run starts: a
	// pipeline that went on crawling while the control node was switched
	// (doc/migrating.md). Each is crawled to its end beside the take loop,
	// Entries more entries after those it shipped; its settings are read
	// once first, so an abort requested meanwhile is seen.
	Resume []string
}

func (o RunOptions) withDefaults() RunOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ReportInterval, time.Second)
	def(&o.HeartbeatInterval, time.Second)
	def(&o.PollInterval, time.Second)
	def(&o.EntryInterval, 100*time.Millisecond)
	if o.Entries <= 0 {
		o.Entries = 20
	}
	if len(o.Codes) == 0 {
		o.Codes = []int{200, 200, 200, 301, 404, 500}
	}
	return o
}

// Event kinds.
const (
	EventReport  = "report"
	EventTake    = "take"
	EventLog     = "log"
	EventAbort   = "abort"
	EventDone    = "done"
	EventExit    = "exit"
	EventCrash   = "crash"
	EventError   = "error"
	EventSetting = "settings"
	// EventIdle: a take found no job; once per wait, not per look.
	EventIdle = "idle"
)

// Event is one step of an autonomous run.
type Event struct {
	Kind  string
	Ident string
	// Score of a log entry; settings age of a settings event; for a take
	// through the pipeline API, how long it took in microseconds.
	N   int64
	Err error
}

// String is the event as the simulator prints it, N with its unit:
// "take IDENT in 37.186ms", "settings IDENT (settings age 3)",
// "log IDENT entry 12".
func (e Event) String() string {
	if e.Kind == EventIdle && e.Err == nil {
		return "waiting: no job is queued; this pipeline takes the next one (!a URL in the node's console or channel queues one)"
	}
	s := e.Kind
	if e.Ident != "" {
		s += " " + e.Ident
	}
	if e.N != 0 {
		n := strconv.FormatInt(e.N, 10)
		switch e.Kind {
		case EventTake:
			s += " in " + (time.Duration(e.N) * time.Microsecond).String()
		case EventSetting:
			s += " (settings age " + n + ")"
		case EventLog:
			s += " entry " + n
		default:
			s += " " + n
		}
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// ErrCrashed is returned by Run when the pipeline crashed (CrashAfter or
// Crash): it stopped without unregistering, its job left in working.
var ErrCrashed = errors.New("pipeline crashed")

// Crash makes a running Run stop at once without unregistering and without
// finishing its job, as a killed pipeline would.
func (p *Pipeline) Crash() {
	p.crashMu.Lock()
	defer p.crashMu.Unlock()
	p.crashed = true
	if p.crash != nil {
		p.crash()
	}
}

// Run reports every ReportInterval and works jobs one at a time until ctx
// ends or MaxJobs are done, then exits cleanly (Exit); a job in progress
// when ctx ends is left in working. Each job: heartbeat every
// HeartbeatInterval, Entries log entries, settings changes honoured (an
// abort_requested job is aborted), then Done.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) error {
	o = o.withDefaults()
	emit := func(e Event) {
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.crashMu.Lock()
	p.crash = cancel
	crashed := p.crashed
	p.crashMu.Unlock()
	if crashed {
		return ErrCrashed
	}
	var wg sync.WaitGroup
	wg.Add(1)
	reported := make(chan struct{})
	go func() { defer wg.Done(); reportRunning(runCtx, o.ReportInterval, p.Report, emit, reported) }()
	// The pipeline's record (its nickname) is written before its first
	// take, as a pipeline that announces itself at start does: a take
	// before it made the start notice name the pipeline by its id.
	select {
	case <-reported:
	case <-runCtx.Done():
	}
	// A clean end (MaxJobs reached) waits for the resumed jobs too, as a
	// pipeline asked to stop finishes the jobs it has.
	var resumed sync.WaitGroup
	for _, id := range o.Resume {
		resumed.Add(1)
		go func() {
			defer resumed.Done()
			j, err := p.Resume(runCtx, id)
			if err == nil {
				var entries int
				err = p.crawl(runCtx, j, o, emit, &entries)
			}
			if err != nil && runCtx.Err() == nil {
				emit(Event{Kind: EventError, Ident: id, Err: err})
			}
		}()
	}
	err := p.work(runCtx, o, emit)
	resumed.Wait()
	cancel()
	wg.Wait()
	p.crashMu.Lock()
	crashed = p.crashed
	p.crashMu.Unlock()
	if crashed {
		emit(Event{Kind: EventCrash})
		return ErrCrashed
	}
	// Unregister even though ctx ended: that is what a clean exit is.
	exitCtx, cancelExit := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelExit()
	if xerr := p.Exit(exitCtx); xerr != nil {
		return errors.Join(err, fmt.Errorf("exit: %w", xerr))
	}
	emit(Event{Kind: EventExit})
	return err
}

// reportRunning reports "Running" at once and then every interval until
// ctx ends, emitting the outcome of each report made while ctx lasts;
// reported (when not nil) is closed once the first report was tried.
func reportRunning(ctx context.Context, interval time.Duration, report func(context.Context, string) error, emit func(Event), reported chan<- struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := report(ctx, "Running")
		if reported != nil {
			close(reported)
			reported = nil
		}
		if ctx.Err() != nil {
			return
		}
		emit(Event{Kind: EventReport, Err: err})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pipeline) work(ctx context.Context, o RunOptions, emit func(Event)) error {
	jobs, entries := 0, 0
	idle := false
	for ctx.Err() == nil && (o.MaxJobs == 0 || jobs < o.MaxJobs) {
		j, err := p.Take(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			emit(Event{Kind: EventError, Err: err})
		}
		if j == nil {
			if err == nil && !idle {
				emit(Event{Kind: EventIdle})
			}
			idle = true
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.PollInterval):
			}
			continue
		}
		idle = false
		emit(Event{Kind: EventTake, Ident: j.Ident})
		jobs++
		if err := p.crawl(ctx, j, o, emit, &entries); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("job %s: %w", j.Ident, err)
		}
	}
	return nil
}

// crawl runs one job to its end (done or aborted), or until ctx ends.
func (p *Pipeline) crawl(ctx context.Context, j *Job, o RunOptions, emit func(Event), entries *int) error {
	ps := p.rdb.Subscribe(ctx, channelJob(j.Ident))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return fmt.Errorf("subscribe to settings: %w", err)
	}
	ages := ps.Channel()
	// The first heartbeat goes out as the crawl starts, so a crash at any
	// later point leaves a job the reaper watches (it skips jobs that never
	// sent one).
	if err := j.Heartbeat(ctx); err != nil && ctx.Err() == nil {
		emit(Event{Kind: EventError, Ident: j.Ident, Err: err})
	}
	if j.resumed {
		// Settings changed while the crawler was not listening (an abort
		// requested during the switch) are read now.
		age, _ := strconv.ParseInt(j.Fields["settings_age"], 10, 64)
		ended, err := j.SettingsChanged(ctx, age)
		if err != nil {
			return err
		}
		if ended {
			emit(Event{Kind: EventAbort, Ident: j.Ident})
			emit(Event{Kind: EventDone, Ident: j.Ident})
			return nil
		}
	} else if _, err := j.LogStdout(ctx, fmt.Sprintf(StdoutReceived, j.Ident)); err != nil && ctx.Err() == nil {
		emit(Event{Kind: EventError, Ident: j.Ident, Err: err})
	}
	hb := time.NewTicker(o.HeartbeatInterval)
	defer hb.Stop()
	next := time.NewTimer(0)
	defer next.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-hb.C:
			if err := j.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				emit(Event{Kind: EventError, Ident: j.Ident, Err: err})
			}
		case m := <-ages:
			age, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil {
				continue
			}
			emit(Event{Kind: EventSetting, Ident: j.Ident, N: age})
			ended, err := j.SettingsChanged(ctx, age)
			if err != nil {
				return err
			}
			if ended {
				emit(Event{Kind: EventAbort, Ident: j.Ident})
				emit(Event{Kind: EventDone, Ident: j.Ident})
				return nil
			}
		case <-next.C:
			if i == o.Entries {
				if _, err := j.LogStdout(ctx, fmt.Sprintf(StdoutFinished, j.Ident)); err != nil {
					return err
				}
				if err := j.Done(ctx); err != nil {
					return err
				}
				emit(Event{Kind: EventDone, Ident: j.Ident})
				return nil
			}
			i++
			*entries++
			url := fmt.Sprintf("%spage/%d", strings.TrimSuffix(j.Fields["url"], "/")+"/", i)
			var n int64
			var err error
			switch {
			case o.InvalidEvery > 0 && i%o.InvalidEvery == 0:
				n, err = j.Log(ctx, "not json {"+url)
			case o.IgnoreEvery > 0 && i%o.IgnoreEvery == 0 && !j.IgnoreReports():
				// Ignored, and not reported: upstream's pipeline writes
				// no entry while the job's ignore reports are off.
				next.Reset(o.EntryInterval)
				continue
			case o.IgnoreEvery > 0 && i%o.IgnoreEvery == 0:
				n, err = j.LogIgnore(ctx, url, "/page/", "global")
			default:
				n, err = j.LogDownload(ctx, url, o.Codes[(i-1)%len(o.Codes)])
				if err == nil {
					err = j.AddCounters(ctx, 1000, 1, 2)
				}
			}
			if err != nil {
				return err
			}
			emit(Event{Kind: EventLog, Ident: j.Ident, N: n})
			if o.CrashAfter > 0 && *entries >= o.CrashAfter {
				p.Crash()
				return nil
			}
			next.Reset(o.EntryInterval)
		}
	}
}

// Options are the flags of `archivebot simulate-pipeline`.
type Options struct {
	RedisURL string
	Nickname string
	ID       string
	Version  string
	AOOnly   bool
	Large    bool
	Codes    string // comma-separated response codes
	// Node and Key: API mode (no Redis): the node's pipeline API address
	// and the pipeline's key file (archivebot bridge -init).
	Node, Key string
	// Workers is how many jobs an API-mode pipeline runs at once.
	Workers int
	// Upstream: Config.Upstream, for a bridge's REDIS_URL.
	Upstream bool
	RunOptions
}

// RegisterFlags defines the subcommand's flags on fs, writing into o.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RedisURL, "redis", "", "Redis URL of the control node (default: $REDIS_URL, else "+DefaultRedisURL+")")
	fs.StringVar(&o.Nickname, "nickname", "simpipe", "pipeline nickname (pending:NAME queues whose NAME is a substring of it are taken)")
	fs.StringVar(&o.ID, "id", "", "md5 hex id of the pipeline key (default: md5 of nickname, host and pid)")
	fs.StringVar(&o.Version, "version", "20250101.01", "version to report")
	fs.BoolVar(&o.AOOnly, "ao-only", false, "take only !ao jobs (pending-ao, and pending-large with -large)")
	fs.BoolVar(&o.Large, "large", false, "also take pending-large jobs")
	fs.StringVar(&o.Codes, "codes", "200,200,200,301,404,500", "response codes the log entries cycle through (0 = network error)")
	fs.IntVar(&o.Entries, "entries", 20, "download log entries per job")
	fs.DurationVar(&o.EntryInterval, "entry-interval", 100*time.Millisecond, "time between two log entries")
	fs.DurationVar(&o.ReportInterval, "report-interval", time.Second, "time between two pipeline reports")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", time.Second, "time between two job heartbeats")
	fs.DurationVar(&o.PollInterval, "poll-interval", time.Second, "time between two queue checks while idle")
	fs.IntVar(&o.InvalidEvery, "invalid-every", 0, "make every Nth log entry invalid JSON (0: never)")
	fs.IntVar(&o.IgnoreEvery, "ignore-every", 0, "make every Nth log entry an ignore entry (0: never)")
	fs.IntVar(&o.MaxJobs, "max-jobs", 0, "exit cleanly after this many jobs (0: until interrupted)")
	fs.StringVar(&o.Node, "node", "", "API mode: the node's pipeline API address (pipelines.listen, http:// or https://); no Redis is used")
	fs.StringVar(&o.Key, "key", "", "API mode: the pipeline's key file (archivebot bridge -init -key FILE)")
	fs.BoolVar(&o.Upstream, "upstream", false, "send exactly upstream's commands and scripts (EVALSHA of upstream's three SHA1s): for -redis pointing at archivebot bridge; a plain Redis answers NOSCRIPT")
	fs.IntVar(&o.Workers, "workers", 1, "API mode: jobs run at once")
	fs.IntVar(&o.CrashAfter, "crash-after", 0, "crash (stop without unregistering or finishing the job) after this many log entries (0: never)")
	fs.Func("resume", "`IDENT[,IDENT...]`: jobs this pipeline already holds in working (give its -id and -nickname too), crawled on to their end beside the jobs it takes, as an upstream pipeline goes on crawling across a switch-over (doc/migrating.md)", func(v string) error {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				o.Resume = append(o.Resume, id)
			}
		}
		return nil
	})
}

// DefaultRedisURL is the Redis the simulator uses without -redis and
// REDIS_URL: the embedded Redis of a node started without configuration.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Run is `archivebot simulate-pipeline`: it connects to o.RedisURL and runs
// one simulated pipeline until ctx ends (then exits cleanly), MaxJobs are
// done or it crashes, printing each step on out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if (o.Node == "") != (o.Key == "") {
		return errors.New("API mode needs both -node URL and -key FILE")
	}
	if o.Node != "" {
		if o.Upstream {
			return errors.New("-upstream is for Redis mode (-redis, the bridge's REDIS_URL); API mode speaks the API")
		}
		if len(o.Resume) > 0 {
			return errors.New("-resume is for Redis mode: a job held through the API is the node's to hand back")
		}
		return runAPI(ctx, o, out)
	}
	if o.RedisURL == "" {
		o.RedisURL = envOr("REDIS_URL", DefaultRedisURL)
	}
	ropt, err := config.ParseRedisURL(o.RedisURL)
	if err != nil {
		return fmt.Errorf("-redis (or REDIS_URL): %w", err)
	}
	if err := o.parseCodes(); err != nil {
		return err
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", config.RedactURL(o.RedisURL), err)
	}
	cfg := Config{Nickname: o.Nickname, ID: o.ID, Version: o.Version, AOOnly: o.AOOnly, Large: o.Large, Upstream: o.Upstream}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = md5hex(fmt.Sprintf("%s\x00%s\x00%d", o.Nickname, host, os.Getpid()))
	}
	p := New(rdb, cfg)
	mode := ""
	if o.Upstream {
		mode = ", upstream's commands and scripts"
	}
	fmt.Fprintf(out, "pipeline %q (%s) on %s%s\n", p.Nickname(), p.Key(), o.RedisURL, mode)
	ro := o.RunOptions
	// One line per step of a job, not per log entry: the entries are
	// counted and the count goes on the job's last line. Resumed jobs
	// are crawled beside the taken ones: events come from several
	// goroutines.
	var mu sync.Mutex
	logged := map[string]int{}
	ro.OnEvent = func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == EventReport && e.Err == nil:
			return
		case e.Kind == EventLog && e.Err == nil:
			logged[e.Ident]++
			return
		case e.Kind == EventDone:
			fmt.Fprintf(out, "%s %s (%d log entries)\n", time.Now().Format("15:04:05.000"), e, logged[e.Ident])
			delete(logged, e.Ident)
			return
		}
		fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05.000"), e)
	}
	err = p.Run(ctx, ro)
	if errors.Is(err, ErrCrashed) {
		fmt.Fprintln(out, "crashed: the pipeline record and the job in working are left behind")
		return nil
	}
	return err
}

// runAPI is simulate-pipeline -node URL -key FILE.
func runAPI(ctx context.Context, o Options, out io.Writer) error {
	if err := o.parseCodes(); err != nil {
		return err
	}
	k, err := bridge.LoadKey(o.Key)
	if err != nil {
		return err
	}
	c, err := client.New(o.Node, k.Name, k.Priv)
	if err != nil {
		return err
	}
	if o.CrashAfter > 0 {
		return errors.New("-crash-after is for Redis mode only")
	}
	p := NewAPI(c, Config{Nickname: o.Nickname, Version: o.Version, AOOnly: o.AOOnly, Large: o.Large})
	fmt.Fprintf(out, "pipeline key %q on %s, %d worker(s)\n", k.Name, o.Node, o.Workers)
	ro := o.RunOptions
	// Workers wait together: one "waiting" line until a job is taken.
	var mu sync.Mutex
	waiting := false
	ro.OnEvent = func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == EventReport && e.Err == nil:
			return
		case e.Kind == EventIdle:
			if waiting {
				return
			}
			waiting = true
		case e.Kind == EventTake:
			waiting = false
		}
		fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05.000"), e)
	}
	return p.Run(ctx, ro, o.Workers)
}

func (o *Options) parseCodes() error {
	if o.Codes == "" {
		return nil
	}
	o.RunOptions.Codes = nil
	for _, f := range strings.Split(o.Codes, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-codes: %q is not a number", f)
		}
		o.RunOptions.Codes = append(o.RunOptions.Codes, c)
	}
	return nil
}
