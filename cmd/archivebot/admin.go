package main

// The operator's commands: jobs, job, fail, abort, expire, pipelines,
// requeue, reap-pipeline. They act on the configured Redis through the
// store methods and scripts the bot's commands use, so they have the same
// atomicity and the same refusals. They have no IRC connection: what the
// channel must hear (a fail, a requeue) is queued in
// archivebot:admin_notices, which the running node delivers.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/store"
)

// adminCmd is what every operator's command shares: -config, -json, the
// store, the operator's name and the output.
type adminCmd struct {
	name        string
	configPath  string
	redisListen string
	json        bool
	fs          *flag.FlagSet
	stdout      io.Writer
	stderr      io.Writer

	cfg   *config.Config
	store *store.Store
	close func()
}

func newAdminCmd(name string, stdout, stderr io.Writer) *adminCmd {
	a := &adminCmd{name: name, stdout: stdout, stderr: stderr, fs: newFlagSet(name, stderr)}
	registerConfigFlag(a.fs, &a.configPath, "none: REDIS_URL, else the embedded Redis of a running node at redis.listen")
	a.fs.StringVar(&a.redisListen, "redis-listen", "", "address of the running node's embedded Redis (redis.listen; env "+config.EnvRedisListen+")")
	a.fs.BoolVar(&a.json, "json", false, "write JSON instead of a table")
	return a
}

// runNoArgs runs the operator command name, which takes no arguments:
// it parses args and runs fn in a session.
func runNoArgs(name string, args []string, stdout, stderr io.Writer, fn func(ctx context.Context, a *adminCmd) int) int {
	a := newAdminCmd(name, stdout, stderr)
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int { return fn(ctx, a) })
}

// parse parses the flags and checks that there are want arguments. The
// exit status is -1 when the command should go on.
func (a *adminCmd) parse(args []string, want int) ([]string, int) {
	asked := jsonAsked(args)
	usage := a.fs.Usage
	if asked {
		// A bad flag is reported as JSON too, without the usage text.
		a.fs.SetOutput(io.Discard)
		a.fs.Usage = func() {}
	}
	pos, err := parseInterspersed(a.fs, args)
	if asked {
		a.fs.SetOutput(a.stderr)
		a.fs.Usage = usage
	}
	if err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp) && asked:
			usage()
		case asked:
			a.json = true
			a.failf("%v (see archivebot %s -h)", err, a.name)
		}
		return nil, flagExit(err)
	}
	if len(pos) != want {
		if want == 0 {
			a.failf("takes no arguments, got %q", strings.Join(pos, " "))
		} else {
			a.failf("needs exactly %d argument (see archivebot %s -h), got %d", want, a.name, len(pos))
		}
		return nil, 2
	}
	return pos, -1
}

// failf reports an error: a line on standard error, or with -json an
// object {"command", "error"} on standard output (scripts read one
// stream). The exit status says that it failed (archivebot help, Exit
// status).
func (a *adminCmd) failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if a.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetEscapeHTML(false)
		if enc.Encode(errorResult{Command: a.name, Error: msg}) == nil {
			return
		}
	}
	fmt.Fprintf(a.stderr, "archivebot %s: %s\n", a.name, msg)
}

// errorResult is an error of a command run with -json.
type errorResult struct {
	Command string `json:"command"`
	Error   string `json:"error"`
}

// jsonAsked reports whether args ask for -json (before the flags are
// parsed: a bad flag is reported in the format asked for).
func jsonAsked(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case "json", "json=true", "json=1", "json=t", "json=TRUE", "json=True":
			return strings.HasPrefix(a, "-")
		}
	}
	return false
}

// connect loads the configuration and reaches Redis; false (after saying
// why) when it cannot.
func (a *adminCmd) connect(ctx context.Context) bool {
	path := a.configPath
	if path == "" {
		path = (&nodeOptions{}).configPath()
	}
	cfg, err := config.LoadWith(path, config.Overrides{RedisListen: a.redisListen})
	if err != nil {
		a.failf("%v", err)
		return false
	}
	a.cfg = cfg
	// The command says itself why Redis did not answer; go-redis's own
	// lines about it would only repeat it.
	quiet, _ := newLogger(a.stderr, "text", "error")
	routeRedisLog(quiet)
	store, closeFn, _, err := adminStore(ctx, cfg)
	if err != nil {
		a.failf("%v", err)
		return false
	}
	a.store, a.close = store, closeFn
	return true
}

func (a *adminCmd) done() {
	if a.close != nil {
		a.close()
	}
}

// session runs fn connected: with a context that ends on SIGINT/SIGTERM,
// the configuration loaded and Redis reached, closed again after fn. The
// exit status is 1 when it cannot connect, fn's otherwise.
func (a *adminCmd) session(fn func(ctx context.Context) int) int {
	ctx, cancel := adminContext()
	defer cancel()
	if !a.connect(ctx) {
		return 1
	}
	defer a.done()
	return fn(ctx)
}

// writeJSON writes v as indented JSON.
func (a *adminCmd) writeJSON(v any) int {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		a.failf("%v", err)
		return 1
	}
	return 0
}

// listed answers a listing of n rows where the caller need not write a
// table: with -json, rows as JSON; with no rows, empty as the one line.
// done is false when the caller writes the table.
func (a *adminCmd) listed(rows any, n int, empty string) (code int, done bool) {
	if a.json {
		return a.writeJSON(rows), true
	}
	if n == 0 {
		fmt.Fprintln(a.stdout, empty)
		return 0, true
	}
	return 0, false
}

// table is a tab-aligned table on stdout, laid out as every command's
// tables are.
func (a *adminCmd) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
}

// operator names who ran the command, for reasons and channel lines.
func operator() string { return localUser() }

// adminContext ends on SIGINT/SIGTERM.
func adminContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// identArg checks an ident argument the way the bot does (lowercase
// base 36); a URL is turned into its ident when allowURL.
func (a *adminCmd) identArg(arg string, allowURL bool) (string, bool) {
	if allowURL && strings.Contains(arg, "://") {
		_, id, err := ident.FromURL(arg)
		if err != nil {
			a.failf("%s: %v", arg, err)
			return "", false
		}
		return id, true
	}
	if arg == "" || strings.Trim(arg, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		hint := ""
		if !allowURL && strings.Contains(arg, "://") {
			hint = " (a URL: archivebot ident URL gives its ident)"
		}
		a.failf("%q is not a job ident%s", arg, hint)
		return "", false
	}
	return arg, true
}

// parseIdent parses the flags and the one argument, a job ident (or, when
// allowURL, a URL turned into one). The exit status is -1 when the command
// should go on.
func (a *adminCmd) parseIdent(args []string, allowURL bool) (string, int) {
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return "", code
	}
	id, ok := a.identArg(pos[0], allowURL)
	if !ok {
		return "", 2
	}
	return id, -1
}

// refusal reports a store error; exit status 1.
func (a *adminCmd) refusal(id string, err error) int {
	var notJob *store.NotAJobError
	switch {
	case errors.Is(err, store.ErrNoJob):
		a.failf("no job %s (neither a job record nor a failure record); nothing was done", id)
	case errors.As(err, &notJob):
		a.failf("key %s is not a job record (it holds another kind of value); nothing was done", notJob.Key)
	case store.IsUnavailable(err):
		a.failf("Redis stopped answering: %v; nothing may have been done", err)
	case errors.Is(err, store.ErrOutcomeUnknown):
		a.failf("%v; run \"archivebot job %s\" to see whether it took effect", err, id)
	default:
		a.failf("%v", err)
	}
	return 1
}

// ---------------------------------------------------------------------
// jobs

// jobRow is one line of `archivebot jobs`.
type jobRow struct {
	Ident     string `json:"ident"`
	State     string `json:"state"`
	Queue     string `json:"queue"`
	Position  int64  `json:"position,omitempty"`
	URL       string `json:"url"`
	StartedBy string `json:"started_by"`
	StartedIn string `json:"started_in"`
	// UNIX seconds, integers as in the web API (/jobs).
	QueuedAt  *int64 `json:"queued_at,omitempty"`
	StartedAt *int64 `json:"started_at,omitempty"`
	Pipeline  string `json:"pipeline_id,omitempty"`
	Depth     string `json:"fetch_depth,omitempty"`
	Note      string `json:"note,omitempty"`
}

func runJobs(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("jobs", stdout, stderr)
	queue := a.fs.String("queue", "", "only jobs of this queue (pending, pending-ao, pending-large, pending:NAME, working)")
	state := a.fs.String("state", "", "only jobs in this state: queued or running")
	pipeline := a.fs.String("pipeline", "", "only jobs running on this pipeline (its key, pipeline:…, or the id after it)")
	user := a.fs.String("user", "", "only jobs queued by this nick")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	if *state != "" && *state != store.StateQueued.String() && *state != store.StateRunning.String() {
		a.failf("-state must be queued or running, got %q", *state)
		return 2
	}
	return a.session(func(ctx context.Context) int {
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		pipeKey := pipelineKey(*pipeline)
		rows := []jobRow{}
		for _, j := range jobs {
			r := jobRow{Ident: j.Ident, Queue: j.Queue, Position: j.Position, State: j.State().String(),
				URL: j.Job.URL.Value, StartedBy: j.Job.StartedBy.Value, StartedIn: j.Job.StartedIn.Value,
				QueuedAt: unixField(j.Job.QueuedAt), StartedAt: unixField(j.Job.StartedAt), Pipeline: j.Job.PipelineID.Value,
				Depth: j.Job.FetchDepth.Value, Note: j.Job.Note.Value}
			switch {
			case *queue != "" && r.Queue != *queue,
				*state != "" && r.State != *state,
				*pipeline != "" && r.Pipeline != pipeKey,
				*user != "" && !strings.EqualFold(r.StartedBy, *user):
				continue
			}
			rows = append(rows, r)
		}
		if code, done := a.listed(rows, len(rows), "No jobs."); done {
			return code
		}
		tw := a.table()
		fmt.Fprintln(tw, "IDENT\tSTATE\tQUEUE\tPOS\tAGE\tBY\tPIPELINE\tURL")
		now := time.Now()
		for _, r := range rows {
			pos, since := "", r.QueuedAt
			if r.Position > 0 {
				pos = strconv.FormatInt(r.Position, 10)
			}
			if r.State == "running" {
				since = r.StartedAt
			}
			// Every field but pos and age is what Redis holds: cleaned.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tc(r.Ident), r.State, tc(r.Queue), pos, age(now, since),
				tc(r.StartedBy), tc(strings.TrimPrefix(r.Pipeline, store.PipelinePrefix)), tc(r.URL))
		}
		tw.Flush()
		return 0
	})
}

// tc makes a field read from Redis safe to print on the operator's
// terminal: pipelines write most of what the tables show, and an escape
// sequence in a title, a nickname or a URL must not reach the terminal
// (title changes, screen clears, forged rows).
func tc(s string) string { return text.Terminal(s) }

// pipelineKey turns a pipeline id or key into the key.
func pipelineKey(s string) string {
	if s == "" || strings.HasPrefix(s, store.PipelinePrefix) {
		return s
	}
	return store.PipelinePrefix + s
}

// unixField reads a UNIX time field (seconds, maybe with a fraction) as
// whole seconds; nil when it is missing or not a number.
func unixField(v store.Number) *int64 {
	if !v.OK || v.Float <= 0 {
		return nil
	}
	return v.Ptr()
}

// age writes how long ago a UNIX time was.
func age(now time.Time, unix *int64) string {
	if unix == nil {
		return "-"
	}
	d := now.Sub(time.Unix(*unix, 0))
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// ---------------------------------------------------------------------
// job

// jobView is `archivebot job --json`.
type jobView struct {
	Ident    string            `json:"ident"`
	URL      string            `json:"url"`
	State    string            `json:"state"`
	Queue    string            `json:"queue,omitempty"`
	Position int64             `json:"position,omitempty"`
	QueueLen int64             `json:"queue_length,omitempty"`
	Working  bool              `json:"working"`
	Origin   string            `json:"origin_queue,omitempty"`
	TTL      *float64          `json:"expires_in_seconds,omitempty"`
	Fields   map[string]string `json:"fields,omitempty"`
	Ignores  []string          `json:"ignores"`
	Failure  *failureView      `json:"failure,omitempty"`
	Pipeline *pipelineView     `json:"pipeline,omitempty"`
}

type failureView struct {
	Reason   string            `json:"reason"`
	FailedBy string            `json:"failed_by"`
	FailedAt float64           `json:"failed_at"`
	Queue    string            `json:"queue"`
	Job      map[string]string `json:"job,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

func runJob(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("job", stdout, stderr)
	id, code := a.parseIdent(args, true)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		d, err := a.store.JobDetail(ctx, id)
		if err != nil {
			return a.refusal(id, err)
		}
		if d == nil {
			return a.refusal(id, store.ErrNoJob)
		}
		v := jobView{Ident: id, Queue: d.Queue, Position: d.Position, QueueLen: d.QueueLen, Working: d.Working, Ignores: d.Ignores}
		if v.Ignores == nil {
			v.Ignores = []string{}
		}
		if v.Origin, err = a.store.Origin(ctx, id); err != nil {
			return a.refusal(id, err)
		}
		if d.Job != nil {
			v.Fields, v.URL, v.State = d.Job.Fields, d.Job.URL.Value, d.State().String()
			if d.TTL >= 0 {
				s := d.TTL.Seconds()
				v.TTL = &s
			}
			if p := d.Job.PipelineID.Value; p != "" {
				pl, err := a.store.GetPipeline(ctx, p)
				if err != nil {
					return a.refusal(id, err)
				}
				v.Pipeline = &pipelineView{Key: p, Gone: pl == nil}
				if pl != nil {
					v.Pipeline.fill(pl, time.Now(), a.cfg.Notifier.PipelineSilentAfter.Duration)
				}
			}
		}
		if f := d.Failure; f != nil {
			v.Failure = &failureView{Reason: f.Reason, FailedBy: f.FailedBy, FailedAt: f.FailedAt, Queue: f.Queue, Job: f.Job, Extra: f.Extra}
			if d.Job == nil {
				v.State, v.URL = store.StateFailed.String(), f.URL
			}
		}
		if a.json {
			return a.writeJSON(v)
		}
		tw := a.table()
		line := func(k, val string) {
			if val != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", k, tc(val))
			}
		}
		line("ident", v.Ident)
		line("url", v.URL)
		line("state", v.State)
		if v.Queue != "" {
			line("queue", fmt.Sprintf("%s, position %d of %d (1 runs next)", v.Queue, v.Position, v.QueueLen))
		}
		if v.Working {
			line("working", "yes")
		}
		line("origin queue", v.Origin)
		if v.TTL != nil {
			line("expires in", time.Duration(*v.TTL*float64(time.Second)).Round(time.Second).String())
		}
		if p := v.Pipeline; p != nil {
			desc := p.Key + " (gone: no record)"
			if !p.Gone {
				desc = fmt.Sprintf("%s %q, last report %s ago", p.Key, p.Nickname, time.Duration(p.AgeSeconds*float64(time.Second)).Round(time.Second))
				if p.Silent {
					desc += " (silent)"
				}
			}
			line("pipeline", desc)
		}
		if f := v.Failure; f != nil {
			line("failed", fmt.Sprintf("%s, by %s, at %s, from %s", f.Reason, f.FailedBy,
				time.Unix(int64(f.FailedAt), 0).UTC().Format(time.RFC3339), f.Queue))
		}
		keys := make([]string, 0, len(v.Fields))
		for k := range v.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "  %s:\t%s\n", tc(k), tc(v.Fields[k]))
		}
		fmt.Fprintf(tw, "ignores:\t%d patterns\n", len(v.Ignores))
		for _, p := range v.Ignores {
			fmt.Fprintf(tw, "  \t%s\n", tc(p))
		}
		tw.Flush()
		return 0
	})
}

// ---------------------------------------------------------------------
// fail, abort, expire

// actionResult is the --json output of fail, abort, expire and requeue.
type actionResult struct {
	Ident  string `json:"ident"`
	URL    string `json:"url,omitempty"`
	Result string `json:"result"`
	// Queue is where a requeued job went.
	Queue   string `json:"queue,omitempty"`
	Ignores *int64 `json:"ignores,omitempty"`
	// Notice is the line queued for the channel (delivered by the node).
	Notice *store.AdminNotice `json:"notice,omitempty"`
}

func (a *adminCmd) report(r actionResult, text string) int {
	if a.json {
		return a.writeJSON(r)
	}
	fmt.Fprintln(a.stdout, tc(text))
	if r.Notice != nil {
		where := r.Notice.Channel
		if where == "" {
			where = "every channel"
		}
		fmt.Fprintf(a.stdout, "Queued for %s: %s\n", tc(where), tc(r.Notice.Text))
	}
	return 0
}

// notify queues a line for the channel; a failure is reported (the change
// itself is made) with exit status 1.
func (a *adminCmd) notify(ctx context.Context, n store.AdminNotice) (*store.AdminNotice, error) {
	if err := a.store.PushAdminNotice(ctx, n); err != nil {
		a.failf("the change was made, but the line for %s could not be queued: %v", n.Channel, err)
		return nil, err
	}
	return &n, nil
}

// identCommand is a command with no flags of its own and one ident
// argument (no URL): fail, abort, expire. The exit status is -1 when the
// command should go on.
func identCommand(name string, args []string, stdout, stderr io.Writer) (*adminCmd, string, int) {
	a := newAdminCmd(name, stdout, stderr)
	id, code := a.parseIdent(args, false)
	if code >= 0 {
		return nil, "", code
	}
	return a, id, -1
}

func runFail(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a, id, code := identCommand("fail", args, stdout, stderr)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		who := operator()
		job, err := a.store.FailJobBy(ctx, id, "failed by "+who, who)
		if errors.Is(err, store.ErrJobFinished) {
			a.failf("job %s has already finished; there is nothing to fail", id)
			return 1
		}
		if err != nil {
			return a.refusal(id, err)
		}
		r := actionResult{Ident: id, URL: job.URL.Value, Result: "failed"}
		n, err := a.notify(ctx, store.AdminNotice{Channel: job.StartedIn.Value,
			Text: fmt.Sprintf("Job %s for %s was failed by %s (operator): removed from its queue, it will not run any more.", id, job.URL.Value, who)})
		r.Notice = n
		if out := a.report(r, fmt.Sprintf("Job %s for %s failed: removed from its queue, it will not run any more.", id, job.URL.Value)); err != nil || out != 0 {
			return 1
		}
		return 0
	})
}

func runAbort(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a, id, code := identCommand("abort", args, stdout, stderr)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		res, url, err := a.store.AbortBy(ctx, id, operator())
		if errors.Is(err, store.ErrJobFinished) {
			a.failf("job %s has already finished; there is nothing to abort", id)
			return 1
		}
		if err != nil {
			return a.refusal(id, err)
		}
		// The channel hears of it through the finish notice: the pipeline
		// writes one when it stops, abort.lua one for a job not yet started.
		if res == store.AbortedQueued {
			return a.report(actionResult{Ident: id, URL: url, Result: "aborted"},
				fmt.Sprintf("Job %s for %s was aborted before it started.", id, url))
		}
		return a.report(actionResult{Ident: id, URL: url, Result: "abort requested"},
			fmt.Sprintf("Initiated abort for %s (%s); its pipeline stops it and reports it.", url, id))
	})
}

func runExpire(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a, id, code := identCommand("expire", args, stdout, stderr)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		err := a.store.ExpireBy(ctx, id, operator())
		if errors.Is(err, store.ErrNoExpiry) {
			a.failf("job %s does not yet have an expiry timer (it has not finished)", id)
			return 1
		}
		if err != nil {
			return a.refusal(id, err)
		}
		return a.report(actionResult{Ident: id, Result: "expired"}, fmt.Sprintf("Job %s expired; its URL can be archived again.", id))
	})
}

// ---------------------------------------------------------------------
// requeue

func runRequeue(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("requeue", stdout, stderr)
	force := a.fs.Bool("force", false, "requeue even though the job's pipeline still reports (it may still be crawling the job)")
	id, code := a.parseIdent(args, false)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		res, err := a.store.Requeue(ctx, id, *force, a.cfg.Notifier.PipelineSilentAfter.Duration)
		var alive *store.PipelineAliveError
		switch {
		case errors.As(err, &alive):
			a.failf("job %s: %v (failing a job does not stop its pipeline, whose mark-done would finish the new run); nothing was done. Use -force to requeue it anyway", id, alive)
			return 1
		case errors.Is(err, store.ErrJobFinished):
			a.failf("job %s has finished; nothing was done (archivebot expire %s, then !a, archives it again)", id, id)
			return 1
		case errors.Is(err, store.ErrJobNotRequeueable), errors.Is(err, store.ErrFailureWithoutJob):
			a.failf("job %s: %v; nothing was done", id, err)
			return 1
		case err != nil:
			return a.refusal(id, err)
		}
		job := store.DecodeJob(id, res.Job)
		url := job.URL.Value
		r := actionResult{Ident: id, URL: url, Result: "requeued", Queue: res.Queue, Ignores: &res.Ignores}
		text := fmt.Sprintf("Job %s for %s was put back in %s by %s (operator).", id, url, res.Queue, operator())
		if nick := job.StartedBy.Value; nick != "" {
			text = nick + ": " + text
		}
		n, nerr := a.notify(ctx, store.AdminNotice{Channel: job.StartedIn.Value, Text: text})
		r.Notice = n
		out := a.report(r, fmt.Sprintf("Job %s for %s requeued in %s (%s job; %d ignore patterns; reset: %s).",
			id, url, res.Queue, res.Source, res.Ignores, strings.Join(store.RequeueResetFields, " ")))
		if nerr != nil || out != 0 {
			return 1
		}
		return 0
	})
}

// ---------------------------------------------------------------------
// pipelines, reap-pipeline

// pipelineView is one pipeline of `archivebot pipelines --json`.
type pipelineView struct {
	Key        string            `json:"key"`
	Nickname   string            `json:"nickname,omitempty"`
	Version    string            `json:"version,omitempty"`
	Hostname   string            `json:"hostname,omitempty"`
	Status     string            `json:"status,omitempty"`
	TS         float64           `json:"ts,omitempty"`
	AgeSeconds float64           `json:"age_seconds,omitempty"`
	Silent     bool              `json:"silent"`
	Gone       bool              `json:"gone,omitempty"`
	Jobs       []string          `json:"jobs,omitempty"`
	Fields     map[string]string `json:"fields,omitempty"`
}

func (v *pipelineView) fill(p *store.Pipeline, now time.Time, silentAfter time.Duration) {
	v.Key, v.Fields = p.Key, p.Fields
	v.Nickname, v.Version, v.Hostname, v.Status = p.Fields["nickname"], p.Fields["version"], p.Fields["hostname"], p.Fields["status"]
	v.TS, _ = strconv.ParseFloat(p.Fields["ts"], 64)
	if v.TS > 0 {
		v.AgeSeconds = max(0, now.Sub(time.Unix(int64(v.TS), 0)).Seconds())
	}
	v.Silent = v.TS == 0 || time.Duration(v.AgeSeconds*float64(time.Second)) > silentAfter
}

func runPipelines(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runNoArgs("pipelines", args, stdout, stderr, func(ctx context.Context, a *adminCmd) int {
		pls, err := a.store.Pipelines(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		byPipe := map[string][]string{}
		for _, j := range jobs {
			if p := j.Job.PipelineID.Value; j.Queue == store.KeyWorking && p != "" {
				byPipe[p] = append(byPipe[p], j.Ident)
			}
		}
		now := time.Now()
		views := []pipelineView{}
		for _, p := range pls {
			var v pipelineView
			v.fill(p, now, a.cfg.Notifier.PipelineSilentAfter.Duration)
			v.Jobs = byPipe[p.Key]
			delete(byPipe, p.Key)
			views = append(views, v)
		}
		// Jobs naming a pipeline that has no record: a pipeline that is gone.
		gone := make([]string, 0, len(byPipe))
		for k := range byPipe {
			gone = append(gone, k)
		}
		slices.Sort(gone)
		for _, k := range gone {
			views = append(views, pipelineView{Key: k, Gone: true, Silent: true, Jobs: byPipe[k]})
		}
		if code, done := a.listed(views, len(views), "No pipelines."); done {
			return code
		}
		tw := a.table()
		fmt.Fprintln(tw, "PIPELINE\tNICKNAME\tVERSION\tHOST\tSTATUS\tLAST REPORT\tJOBS")
		for _, v := range views {
			last := "-"
			switch {
			case v.Gone:
				last = "gone (no record)"
			case v.TS > 0:
				last = time.Duration(v.AgeSeconds*float64(time.Second)).Round(time.Second).String() + " ago"
				if v.Silent {
					last += " (silent)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tc(strings.TrimPrefix(v.Key, store.PipelinePrefix)),
				tc(v.Nickname), tc(v.Version), tc(v.Hostname), tc(v.Status), last, tc(strings.Join(v.Jobs, " ")))
		}
		tw.Flush()
		return 0
	})
}

// reapResult is `archivebot reap-pipeline --json`.
type reapResult struct {
	Pipeline string         `json:"pipeline"`
	Failed   []actionResult `json:"failed"`
	// Removed reports whether the pipeline's record was deleted.
	Removed bool `json:"removed"`
}

func runReapPipeline(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("reap-pipeline", stdout, stderr)
	force := a.fs.Bool("force", false, "reap it even though it still reports")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	key := pipelineKey(pos[0])
	hex := strings.TrimPrefix(key, store.PipelinePrefix)
	if hex == "" || strings.Trim(hex, "0123456789abcdef") != "" {
		a.failf("%q is not a pipeline id (pipeline:<md5hex> or the hex after it; archivebot pipelines lists them)", pos[0])
		return 2
	}
	return a.session(func(ctx context.Context) int {
		silent := a.cfg.Notifier.PipelineSilentAfter.Duration
		p, err := a.store.GetPipeline(ctx, key)
		if err != nil {
			return a.refusal("", err)
		}
		if p != nil && !*force {
			var v pipelineView
			v.fill(p, time.Now(), silent)
			if !v.Silent {
				a.failf("pipeline %s (%q) still reports (last %s ago); nothing was done. Use -force to reap it anyway",
					key, v.Nickname, time.Duration(v.AgeSeconds*float64(time.Second)).Round(time.Second))
				return 1
			}
		}
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		who := operator()
		res := reapResult{Pipeline: key, Failed: []actionResult{}}
		status := 0
		for _, j := range jobs {
			if j.Queue != store.KeyWorking || j.Job.PipelineID.Value != key {
				continue
			}
			job, err := a.store.FailJobBy(ctx, j.Ident, fmt.Sprintf("pipeline %s is gone; failed by %s", hex, who), who)
			if errors.Is(err, store.ErrJobFinished) || errors.Is(err, store.ErrNoJob) {
				continue // it ended meanwhile
			}
			if err != nil {
				a.refusal(j.Ident, err)
				status = 1
				continue
			}
			r := actionResult{Ident: j.Ident, URL: job.URL.Value, Result: "failed"}
			n, err := a.notify(ctx, store.AdminNotice{Channel: job.StartedIn.Value,
				Text: fmt.Sprintf("Job %s for %s was failed by %s (operator): its pipeline %s is gone.", j.Ident, job.URL.Value, who, hex)})
			if err != nil {
				status = 1
			}
			r.Notice = n
			res.Failed = append(res.Failed, r)
		}
		removed, err := a.store.RemovePipeline(ctx, key, silent, *force)
		if err != nil {
			a.failf("the jobs were failed, but the pipeline record stays: %v", err)
			status = 1
		}
		if p == nil && !removed && len(res.Failed) == 0 && status == 0 {
			// Reaped already (or a typo): nothing to fail, nothing to remove.
			a.failf("no pipeline %s: it has no record and no running job names it (reaped already? archivebot pipelines lists them); nothing was done", key)
			return 1
		}
		res.Removed = removed
		if a.json {
			if a.writeJSON(res) != 0 {
				return 1
			}
			return status
		}
		for _, r := range res.Failed {
			fmt.Fprintf(stdout, "Failed job %s for %s.\n", tc(r.Ident), tc(r.URL))
		}
		fmt.Fprintf(stdout, "Pipeline %s: %d jobs failed; record removed: %v.\n", key, len(res.Failed), removed)
		return status
	})
}
