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
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/ident"
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
	store cliStore
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
	st, closeFn, _, err := adminStore(ctx, cfg)
	if err != nil {
		a.failf("%v", err)
		return false
	}
	a.store, a.close = st, closeFn
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
