package main

// The process log: one slog handler (text or JSON, log.format / log.level)
// for everything, go-redis's own messages included, and one `service`
// attribute per line.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/config"
)

// newLogger builds the process logger writing to w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := config.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: cutAttr}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf(`log.format: must be "text" or "json", got %q`, format)
	}
	return slog.New(&serviceHandler{next: h}), nil
}

// routeRedisLog sends go-redis's messages (reconnects, pool trouble) to
// logger at WARN, with service=redis, instead of its own unstructured
// lines on standard error.
func routeRedisLog(logger *slog.Logger) {
	redis.SetLogger(redisLogger{log: logger.With("service", "redis")})
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// serviceHandler keeps one `service` attribute per line: the innermost one
// (a record's own, else the last logger.With). Components name themselves
// and their callers often name them too (logger.With("service", "irc")
// handed to a client that adds service=irc again); without this the line
// says service=irc service=irc.
type serviceHandler struct {
	next    slog.Handler
	service *slog.Attr
	// grouped is set once WithGroup was called: attributes after it belong
	// to the group and are passed on as they are.
	grouped bool
}

func (h *serviceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *serviceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if h.grouped {
		return &serviceHandler{next: h.next.WithAttrs(attrs), service: h.service, grouped: true}
	}
	c := &serviceHandler{service: h.service}
	rest := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key == "service" {
			a := a
			c.service = &a
			continue
		}
		rest = append(rest, a)
	}
	c.next = h.next
	if len(rest) > 0 {
		c.next = h.next.WithAttrs(rest)
	}
	return c
}

func (h *serviceHandler) WithGroup(name string) slog.Handler {
	// The service goes in before the group opens, so it stays top level.
	next := h.next
	if h.service != nil {
		next = next.WithAttrs([]slog.Attr{*h.service})
	}
	return &serviceHandler{next: next.WithGroup(name), grouped: true}
}

func (h *serviceHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.grouped {
		return h.next.Handle(ctx, r)
	}
	service := h.service
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "service" {
			a := a
			service = &a
			return true
		}
		attrs = append(attrs, a)
		return true
	})
	if service == nil {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(slices.Insert(attrs, 0, *service)...)
	return h.next.Handle(ctx, out)
}

// maxLogValue is the most bytes of one attribute value a log line keeps:
// pipelines write the text the services log (a finish notice's URL, a
// whole malformed notice), and one 1 MB notice must not become a 1 MB
// log line.
const maxLogValue = 1024

// cutAttr is a slog ReplaceAttr that shortens long values, saying how
// long they were, and writes durations as Go writes them ("2m0s"): the
// JSON handler would write nanoseconds.
func cutAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch v := a.Value; v.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, v.Duration().String())
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case []byte:
			s = string(x)
		default:
			if len(fmt.Sprint(x)) <= maxLogValue {
				return a
			}
			s = fmt.Sprintf("%+v", x)
		}
	default:
		return a
	}
	if len(s) <= maxLogValue {
		return a
	}
	cut := maxLogValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return slog.String(a.Key, fmt.Sprintf("%s…(cut, %d bytes in all)", s[:cut], len(s)))
}
