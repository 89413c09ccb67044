// Command archivebot is the ArchiveBot control node: the IRC (or console)
// bot and the embedded coordinator services, in one process, and the
// operator's commands over the same Redis. `archivebot help` lists them all
// (cli.go).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/embeddedredis"
	"github.com/archiveteam/archivebot-go/ident"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			return runHelp(args[1:], stdout, stderr)
		case "version", "-version", "--version":
			return runVersion(stdout)
		}
		if c := findCommand(args[0]); c != nil {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fs, o := nodeFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.version {
		return runVersion(stdout)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "archivebot: unknown command %q; \"archivebot help\" lists the commands\n", fs.Arg(0))
		return 2
	}
	if o.check {
		return runCheck(o, stdout, stderr)
	}
	if o.allowInUse {
		fmt.Fprintln(stderr, "archivebot: -allow-in-use goes with -check-config (a start needs its addresses free)")
		return 2
	}
	cfg, err := config.LoadWith(o.configPath(), o.overrides())
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	level, err := o.level(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot: %v\n", err)
		return 2
	}
	logger, err := newLogger(stderr, cfg.Log.Format, level)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot: %v\n", err)
		return 1
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "archivebot: -cpuprofile: %v\n", err)
			return 1
		}
		defer stop()
	}
	routeRedisLog(logger)
	defer startGoroutineDumps()()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger, stdin, stdout); err != nil {
		logger.Error("archivebot stopped", "err", err)
		fmt.Fprintf(stderr, "archivebot: %v\n", err)
		if inUse(err) {
			fmt.Fprint(stderr, inUseAdvice(cfg))
		}
		if errors.Is(err, embeddedredis.ErrAddrInUse) && cfg.File == "" {
			fmt.Fprint(stderr, withoutConfigHint())
		}
		return 1
	}
	return 0
}

// printErr writes err to stderr, each of its lines (one per problem)
// prefixed with "archivebot: ".
func printErr(stderr io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "archivebot: %s\n", line)
	}
}

// runCheck is -check-config: every problem of the configuration in one
// run (its TOML errors with their lines, every key's check, then what a
// run would meet: files, listen addresses, Redis), exit status 1 when
// there is any.
func runCheck(o *nodeOptions, stdout, stderr io.Writer) int {
	cfg, err := config.LoadPartial(o.configPath(), o.overrides())
	var probs config.Problems
	if err != nil && !errors.As(err, &probs) {
		printErr(stderr, err) // the file cannot be read
		return 1
	}
	level, lerr := o.level(cfg)
	if lerr != nil {
		fmt.Fprintf(stderr, "archivebot: %v\n", lerr)
		return 2
	}
	logger, lerr := newLogger(stderr, cfg.Log.Format, level)
	if lerr != nil {
		// Reported among the problems (log.format, log.level).
		logger, _ = newLogger(stderr, "text", "info")
	}
	routeRedisLog(logger)
	n := len(probs)
	if err != nil {
		printErr(stderr, err)
	}
	catalog, err := checkConfig(context.Background(), cfg, logger, probs.Has)
	var inUse []*addrInUseError
	if o.allowInUse {
		inUse, err = splitInUse(err)
	}
	for _, e := range inUse {
		fmt.Fprintf(stderr, "archivebot: warning: %s: %s is in use now: the node needs it free when it starts (before a switch-over, upstream's web app holds 4567 and websocket.py 4568 until they are stopped)\n", e.key, e.addr)
	}
	if err != nil {
		printErr(stderr, err)
		n += strings.Count(err.Error(), "\n") + 1
		if errors.Is(err, embeddedredis.ErrAddrInUse) && cfg.File == "" {
			fmt.Fprint(stderr, withoutConfigHint())
		}
	}
	if n > 0 {
		plural := "s"
		if n == 1 {
			plural = ""
		}
		fmt.Fprintf(stderr, "archivebot: %d problem%s found\n", n, plural)
		return 1
	}
	fmt.Fprintf(stdout, "configuration OK (%s)\n", describe(cfg))
	if catalog != "" {
		fmt.Fprintln(stdout, catalog)
	}
	if len(inUse) > 0 {
		keys := make([]string, len(inUse))
		for i, e := range inUse {
			keys[i] = e.key
		}
		fmt.Fprintf(stdout, "in use now (warnings above): %s; the node needs them free when it starts\n", strings.Join(keys, ", "))
	}
	return 0
}

// splitInUse takes the taken listen addresses out of err (one error, or
// errors.Join of several, as checkConfig returns) and returns the rest.
func splitInUse(err error) ([]*addrInUseError, error) {
	if err == nil {
		return nil, nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var rest []error
	var inUse []*addrInUseError
	for _, e := range errs {
		var u *addrInUseError
		if errors.As(e, &u) {
			inUse = append(inUse, u)
		} else {
			rest = append(rest, e)
		}
	}
	return inUse, errors.Join(rest...)
}

// withoutConfigHint says how to move the embedded Redis without a
// configuration file; with one, the error's own advice names the keys.
func withoutConfigHint() string {
	return fmt.Sprintf("archivebot: without a configuration file: -redis-listen ADDR or %s=ADDR picks another address; %s=redis://HOST:PORT/0 uses the running Redis\n",
		config.EnvRedisListen, config.EnvRedisURL)
}

func describe(cfg *config.Config) string {
	front := "console"
	if !cfg.Console() {
		front = "IRC " + cfg.IRC.Server
	}
	backend := "embedded Redis on " + cfg.Redis.Listen
	switch {
	case len(cfg.Redis.Sentinels) > 0:
		backend = fmt.Sprintf("Redis master %q of sentinels %s", cfg.Redis.MasterName, strings.Join(cfg.Redis.Sentinels, ", "))
	case !cfg.Embedded():
		backend = "Redis " + config.RedactURL(cfg.Redis.URL)
	}
	file := cfg.File
	if file == "" {
		file = "defaults"
	}
	return fmt.Sprintf("%s; %s; %s", file, front, backend)
}

// runIdent prints NORMALIZED<TAB>IDENT for each URL argument, or for each
// line of stdin when there are none.
func runIdent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("ident", stderr)
	urls, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	status := 0
	do := func(raw string) {
		norm, id, err := ident.FromURL(raw)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", raw, err)
			status = 1
			return
		}
		fmt.Fprintf(stdout, "%s\t%s\n", norm, id)
	}
	if len(urls) > 0 {
		for _, a := range urls {
			do(a)
		}
		return status
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			do(line)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "reading stdin: %v\n", err)
		return 1
	}
	return status
}

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "console"
}

// startCPUProfile profiles the whole run into path; stop writes it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
