// Command archivebot is the ArchiveBot control node: the IRC (or console)
// bot and the embedded coordinator services, in one process.
//
//	archivebot [-config FILE]              run the bot
//	archivebot -check-config -config FILE  validate the configuration and exit
//	archivebot ident URL...                print NORMALIZED<TAB>IDENT per URL
//	archivebot simulate-pipeline [flags]   run a test pipeline against Redis
//	archivebot status -config FILE         who holds the leader lease (ha)
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"syscall"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/ident"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "ident":
			return runIdent(args[1:], stdin, stdout, stderr)
		case "simulate-pipeline":
			return runSimulator(args[1:], stdout, stderr)
		case "status":
			return runStatus(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("archivebot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (TOML); none: console front end and embedded Redis")
	check := fs.Bool("check-config", false, "load and validate the configuration, then exit")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "archivebot: unexpected argument %q (subcommands: ident, simulate-pipeline)\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot: %v\n", err)
		return 1
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *check {
		if err := checkConfig(cfg, logger); err != nil {
			fmt.Fprintf(stderr, "archivebot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "configuration OK (%s)\n", describe(cfg))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger, stdin, stdout); err != nil {
		logger.Error("archivebot stopped", "err", err)
		fmt.Fprintf(stderr, "archivebot: %v\n", err)
		return 1
	}
	return 0
}

func describe(cfg *config.Config) string {
	front := "console"
	if !cfg.Console() {
		front = "IRC " + cfg.IRC.Server
	}
	backend := "embedded Redis on " + cfg.Redis.Listen
	if !cfg.Embedded() {
		backend = "Redis " + redactURL(cfg.Redis.URL)
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
	if len(args) > 0 {
		for _, a := range args {
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
