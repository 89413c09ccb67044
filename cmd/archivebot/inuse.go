package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/embeddedredis"
)

// inUse reports whether a run stopped on a listen address another program
// holds.
func inUse(err error) bool {
	var u *addrInUseError
	return errors.Is(err, embeddedredis.ErrAddrInUse) || errors.As(err, &u)
}

// takenAddrs binds every listen address of cfg as a run opens them (the
// embedded Redis's, the web server's, the live stream's, the pipeline
// API's), releases them, and returns those another program holds, as
// "KEY ADDR". A run stops at the first; this names them all.
func takenAddrs(cfg *config.Config) []string {
	var taken []string
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	none := func(string) bool { return false }
	if cfg.Embedded() {
		ln, errs := checkEmbedded(cfg, slog.New(slog.DiscardHandler), none)
		if ln != nil {
			held = append(held, ln)
		}
		for _, err := range errs {
			if errors.Is(err, embeddedredis.ErrAddrInUse) {
				taken = append(taken, "redis.listen "+cfg.Redis.Listen)
			}
		}
	}
	for _, listen := range []func(*config.Config, io.Writer) (net.Listener, error){listenWeb, listenStream, listenPipelines} {
		ln, err := listen(cfg, io.Discard)
		var u *addrInUseError
		switch {
		case errors.As(err, &u):
			taken = append(taken, u.key+" "+u.addr)
		case ln != nil:
			held = append(held, ln)
		}
	}
	return taken
}

// inUseAdvice is what a run that stopped on a taken address adds: every
// address taken now, and the check that names every problem at once.
func inUseAdvice(cfg *config.Config) string {
	var b strings.Builder
	if taken := takenAddrs(cfg); len(taken) > 0 {
		fmt.Fprintf(&b, "archivebot: in use now: %s\n", strings.Join(taken, ", "))
	}
	check := "archivebot -check-config"
	if cfg.File != "" {
		check += " -config " + cfg.File
	}
	fmt.Fprintf(&b, "archivebot: %s checks every address (and the rest of the configuration) at once, without starting\n", check)
	return b.String()
}
