package main

// The command line: the node's flags, the subcommands, help and version.
// Plain package flag: every command is one flag.FlagSet, and the one thing
// flag lacks, flags after arguments (`requeue IDENT --force`), is
// parseInterspersed below; a subcommand library would add a dependency for
// less than that.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
)

// EnvConfig names the configuration file when -config is not given.
const EnvConfig = "ARCHIVEBOT_CONFIG"

// command is one subcommand.
type command struct {
	name, args, summary string
	run                 func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order help shows them.
func commands() []command {
	return []command{
		{"ident", "[URL...]", "print NORMALIZED<TAB>IDENT for each URL (or each line of stdin)", runIdent},
		{"simulate-pipeline", "", "run a test pipeline that does what an upstream pipeline does in Redis", func(a []string, _ io.Reader, o, e io.Writer) int { return runSimulator(a, o, e) }},
		{"bridge", "-key FILE -node URL", "serve an unmodified upstream pipeline (REDIS_URL) through the node's pipeline API; -init -key FILE creates its key pair", func(a []string, _ io.Reader, o, e io.Writer) int { return bridge.Run(a, o, e) }},
		{"jobs", "", "list queued and running jobs", runJobs},
		{"job", "IDENT|URL", "show everything known about one job (record, queue, ignores, failure, pipeline)", runJob},
		{"fail", "IDENT", "give up on a job, as !fail does; the channel is told", runFail},
		{"abort", "IDENT", "abort a job, as !abort does", runAbort},
		{"expire", "IDENT", "expire a finished job now so its URL can be archived again, as !expire does", runExpire},
		{"pipelines", "", "list the pipelines and their jobs", runPipelines},
		{"requeue", "IDENT", "put a failed or dead job back in the queue it came from, with its settings; the channel is told", runRequeue},
		{"reroute", "IDENT [-avoid KEY]", "take a running job away from the pipeline API key that seems banned from its site and queue it again at the front, with that key (or KEY) avoiding the site, as !reroute does", runReroute},
		{"status", "", "which node holds the leader lease (ha), since when, and when it expires; exit 3 when none does", runStatus},
		{"feed", "", "each configured feed network (x, mastodon, bluesky): texts pending, in flight, budget used, digests, give-ups", runFeed},
		{"reap-pipeline", "ID", "fail every job of a pipeline that is gone and forget the pipeline; the channel is told", runReapPipeline},
		{"healthcheck", "", "ask the running node's /readyz (or /healthz); exit 0 when it answers 200 (the image's HEALTHCHECK)", runHealthcheck},
		{"sessions", "list|revoke ID|revoke NICK", "list the dashboard's sessions (nick, account, expiry), or end one (by id prefix) or all of a nick's", runSessions},
		{"pipeline-key", "add NAME PUBKEY|list|revoke NAME|set NAME avoid=D,...|targeted_only=1|0", "manage the pipeline API's keys: register a pipeline's public key, list keys (last seen, jobs held, refusals), revoke one, set its take rules", runPipelineKey},
		{"pause", "[QUEUE|all] [REASON]", "stop handing out jobs from a queue (all when left out) to every pipeline, as !pause does", runPause},
		{"resume", "[QUEUE|all]", "hand out a paused queue's jobs again, in order, as !resume does", runResume},
		{"migrate", "check [-rollback] | return-notices | delete-node-keys [-yes]", "a switch-over from upstream's bot on the same Redis, and back (doc/migrating.md). check: read everything once, write nothing, and say what the node will find, what it will refuse or change at start and what blocks the switch; exit 3 when something blocks; -rollback: what blocks going back. return-notices: put the finish notices a stopped node had taken and not said back at the head of finish_notifications, in order, for upstream's bot. delete-node-keys: count the node's own keys (archivebot:…), delete them with -yes. Both refuse while a node runs", runMigrate},
		{"help", "[COMMAND]", "this text, or one command's", func(a []string, _ io.Reader, o, e io.Writer) int { return runHelp(a, o, e) }},
		{"version", "", "print the module version and VCS revision", func(_ []string, _ io.Reader, o, _ io.Writer) int { return runVersion(o) }},
	}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return &c
		}
	}
	return nil
}

// newFlagSet returns the flag set of subcommand name; -h prints its usage.
func newFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("archivebot "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	c := findCommand(name)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: archivebot %s [flags] %s\n", name, c.args)
		fmt.Fprintf(out, "\n%s\n", c.summary)
		if hasFlags(fs) {
			fmt.Fprintf(out, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseInterspersed parses flags wherever they are among the arguments
// and returns the arguments; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--" or at the first argument; after "--" all
		// are arguments.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagExit is the exit status for a flag parsing error: 0 for -h.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// nodeOptions are the flags of the node itself.
type nodeOptions struct {
	config       string
	check        bool
	allowInUse   bool
	debug        bool
	logLevel     string
	version      bool
	redisListen  string
	dataDir      string
	httpListen   givenString
	streamListen givenString
	cpuProfile   string
}

// givenString is a string flag that remembers being given, so that an
// empty value (-stream-listen "") means "off", not "not given".
type givenString struct {
	value string
	given bool
}

func (g *givenString) String() string { return g.value }

func (g *givenString) Set(v string) error {
	g.value, g.given = v, true
	return nil
}

// overrides are the flags that win over the file and the environment.
func (o *nodeOptions) overrides() config.Overrides {
	return config.Overrides{RedisListen: o.redisListen, DataDir: o.dataDir,
		HTTPListen: o.httpListen.value, HTTPListenSet: o.httpListen.given,
		StreamListen: o.streamListen.value, StreamListenSet: o.streamListen.given}
}

func (o *nodeOptions) configPath() string {
	if o.config != "" {
		return o.config
	}
	return os.Getenv(EnvConfig)
}

func nodeFlags(out io.Writer) (*flag.FlagSet, *nodeOptions) {
	o := &nodeOptions{}
	fs := flag.NewFlagSet("archivebot", flag.ContinueOnError)
	fs.SetOutput(out)
	registerConfigFlag(fs, &o.config, "none: console front end and embedded Redis")
	fs.BoolVar(&o.check, "check-config", false, "check what a run would, short of running, then exit, reporting every problem found: the file (TOML errors with their lines, every key), every listen address (all bound together, then released), Redis or the sentinels (pinged), the data directory, TLS files, ignore sets; warnings as a run prints them")
	fs.BoolVar(&o.allowInUse, "allow-in-use", false, "with -check-config: a listen address (http.listen, http.stream_listen, pipelines.listen) that another program holds now is a warning, not a problem; for the check before a switch-over, while upstream's web app and websocket.py still hold 4567 and 4568 (doc/migrating.md). Every other check is the same; a start still needs them free")
	fs.BoolVar(&o.debug, "debug", false, "log debug messages (same as log.level = \"debug\")")
	fs.StringVar(&o.logLevel, "log-level", "", "`level` of the log on standard error: debug, info, warn or error; wins over log.level (default info). -log-level warn keeps the console's screen to what the bot says")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.redisListen, "redis-listen", "", "address of the embedded Redis, e.g. 127.0.0.1:6380 (redis.listen; env "+config.EnvRedisListen+")")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory of the embedded Redis's snapshot (redis.data_dir; env "+config.EnvDataDir+")")
	fs.Var(&o.httpListen, "http-listen", "`address` of the web API and dashboard, e.g. 127.0.0.1:4577; \"\" switches it off (http.listen; env "+config.EnvHTTPListen+")")
	fs.Var(&o.streamListen, "stream-listen", "`address` of the live stream for upstream's dashboard, e.g. 127.0.0.1:4578; \"\" switches it off (http.stream_listen; env "+config.EnvStreamListen+")")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE`, written at exit (read it with go tool pprof)")
	fs.Usage = func() { usage(out) }
	return fs, o
}

// registerConfigFlag defines -config; without names what is used without
// a file.
func registerConfigFlag(fs *flag.FlagSet, p *string, without string) {
	fs.StringVar(p, "config", "", "configuration file (TOML, see config.example.toml; env "+EnvConfig+"); "+without)
}

// usage is the whole help: commands, the node's flags, each command's
// flags, the environment.
func usage(out io.Writer) {
	fmt.Fprint(out, `archivebot: the ArchiveBot control node (IRC bot and coordinator over Redis)

Usage:
  archivebot [flags]                 run the node
  archivebot COMMAND [flags] [ARGS]  run one command and exit

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(out, "  %-28s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprint(out, "\nFlags of the node:\n")
	fs, _ := nodeFlags(out)
	fs.PrintDefaults()
	for _, c := range commands() {
		if c.name == "help" || c.name == "version" {
			continue
		}
		var b bytes.Buffer
		c.run([]string{"-h"}, strings.NewReader(""), &b, &b)
		_, flags, ok := strings.Cut(b.String(), "\nFlags:\n")
		if !ok {
			continue
		}
		fmt.Fprintf(out, "\nFlags of %s:\n%s", c.name, flags)
	}
	fmt.Fprintf(out, `
Environment:
  %-24s Redis the pipelines share, redis://[:PASSWORD@]HOST:PORT/DB (wins over redis.url)
  %-24s configuration file when -config is not given
  %-24s address of the embedded Redis (redis.listen; -redis-listen wins)
  %-24s directory of the embedded Redis's snapshot (redis.data_dir; -data-dir wins)
  %-24s address of the web API and dashboard (http.listen; -http-listen wins)
  %-24s address of the live stream for upstream's dashboard (http.stream_listen; -stream-listen wins)

The commands other than ident, simulate-pipeline, help and version act on
the Redis of the configuration (REDIS_URL, redis.url, or the embedded Redis
of a running node at redis.listen) and refuse to act when it does not answer.
"archivebot COMMAND -h" shows one command.

Exit status:
  0  done (a run: stopped on SIGINT, SIGTERM or the console's end of input)
  1  failed or refused: the message says why and whether anything was done
     (Redis did not answer, no such job, a run that could not start, a
     -check-config that found errors); with -json the error is a JSON
     object {"command", "error"} on standard output
  2  usage: unknown command or flag, wrong arguments
  3  status: no node holds the leader lease; migrate check: something blocks
     the switch (or, with -rollback, going back), each named
`, config.EnvRedisURL, EnvConfig, config.EnvRedisListen, config.EnvDataDir, config.EnvHTTPListen, config.EnvStreamListen)
}

// runHelp prints the whole help, or one command's.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	c := findCommand(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "archivebot help: unknown command %q\n", args[0])
		return 2
	}
	return c.run([]string{"-h"}, strings.NewReader(""), stdout, stdout)
}

// runVersion prints the module version and the VCS revision the binary was
// built from (debug.ReadBuildInfo).
func runVersion(stdout io.Writer) int {
	fmt.Fprintln(stdout, versionString())
	return 0
}

// Set by the linker (-ldflags "-X main.stampVersion=… -X
// main.stampRevision=…"), as the Dockerfile's build does: a build without
// the VCS information Go stamps by itself (.git outside the build
// context, -buildvcs=false) still says what it was built from.
var stampVersion, stampRevision string

func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "archivebot (no build information)"
	}
	v := bi.Main.Version
	switch {
	case stampVersion != "":
		v = stampVersion
	case v == "":
		v = "(devel)"
	}
	rev, at, dirty := stampRevision, "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if stampRevision == "" {
				rev = s.Value
			}
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" && stampRevision == "" {
				dirty = " (modified)"
			}
		}
	}
	out := fmt.Sprintf("archivebot %s %s", bi.Main.Path, v)
	if rev != "" {
		out += fmt.Sprintf(", revision %s%s", rev, dirty)
		if at != "" {
			out += " of " + at
		}
	} else {
		out += ", revision unknown (built without VCS information)"
	}
	return out + ", " + bi.GoVersion
}

// level is the log level of a run: -debug, else -log-level, else the
// configuration's log.level.
func (o *nodeOptions) level(cfg *config.Config) (string, error) {
	switch {
	case o.debug:
		return "debug", nil
	case o.logLevel != "":
		if _, err := config.ParseLevel(o.logLevel); err != nil {
			return "", fmt.Errorf("-log-level: %w", err)
		}
		return o.logLevel, nil
	}
	return cfg.Log.Level, nil
}
