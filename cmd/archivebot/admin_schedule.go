package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/archiveteam/archivebot-go/internal/sitematch"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// runPause is `archivebot pause [QUEUE|all] [REASON...]`, as !pause
// (doc/protocol.md, Paused queues).
func runPause(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("pause", stdout, stderr)
	pos, err := parseInterspersed(a.fs, args)
	if err != nil {
		return flagExit(err)
	}
	q := store.PauseAll
	if len(pos) > 0 {
		q = pos[0]
	}
	if !store.ValidQueueName(q) {
		a.failf("%q is not a queue: pending, pending-ao, pending-large, pending:NAME or all; nothing was done", q)
		return 2
	}
	reason := ""
	if len(pos) > 1 {
		reason = strings.Join(pos[1:], " ")
	}
	return a.session(func(ctx context.Context) int {
		err := a.store.PauseQueue(ctx, q, operator(), reason)
		switch {
		case errors.Is(err, store.ErrAlreadyPaused), errors.Is(err, store.ErrAllPaused):
			a.failf("%s is already paused (archivebot pause -h; !status shows by whom); nothing was done", q)
			return 1
		case err != nil:
			return a.refusal("", err)
		}
		return a.report(actionResult{Queue: q, Result: "paused"},
			fmt.Sprintf("Paused %s: no pipeline gets a job from it until archivebot resume %s (or !resume %s).", q, q, q))
	})
}

// runResume is `archivebot resume [QUEUE|all]`, as !resume.
func runResume(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("resume", stdout, stderr)
	pos, err := parseInterspersed(a.fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 1 {
		a.failf("takes at most one queue name, got %q", strings.Join(pos, " "))
		return 2
	}
	q := store.PauseAll
	if len(pos) == 1 {
		q = pos[0]
	}
	if !store.ValidQueueName(q) {
		a.failf("%q is not a queue: pending, pending-ao, pending-large, pending:NAME or all; nothing was done", q)
		return 2
	}
	return a.session(func(ctx context.Context) int {
		err := a.store.ResumeQueue(ctx, q)
		switch {
		case errors.Is(err, store.ErrNotPaused):
			a.failf("%s is not paused; nothing was done", q)
			return 1
		case errors.Is(err, store.ErrAllPaused):
			a.failf("every queue is paused: archivebot resume all first; nothing was done")
			return 1
		case err != nil:
			return a.refusal("", err)
		}
		return a.report(actionResult{Queue: q, Result: "resumed"},
			fmt.Sprintf("Resumed %s: its jobs are handed out again, in order.", q))
	})
}

// pipelineKeySet is `archivebot pipeline-key set NAME avoid=D1,D2
// targeted_only=1|0`: the key's take rules (doc/pipeline-api.md, The take
// rule). Every setting is checked before anything is written.
func pipelineKeySet(a *adminCmd, name string, settings []string) int {
	if !wire.ValidKeyName(name) {
		a.failf("%q is not a key name; nothing was done", name)
		return 2
	}
	var avoid []string
	setAvoid, setTargeted, targeted := false, false, false
	for _, s := range settings {
		k, v, ok := strings.Cut(s, "=")
		switch {
		case !ok:
			a.failf("%q: settings are avoid=DOMAIN,... or targeted_only=1|0; nothing was done", s)
			return 2
		case k == "avoid":
			d, err := sitematch.ParseList(v)
			if err != nil {
				a.failf("avoid: %v; nothing was done", err)
				return 2
			}
			avoid, setAvoid = d, true
		case k == "targeted_only" && (v == "1" || v == "0" || v == "true" || v == "false"):
			targeted, setTargeted = v == "1" || v == "true", true
		default:
			a.failf("%q: settings are avoid=DOMAIN,... or targeted_only=1|0; nothing was done", s)
			return 2
		}
	}
	return a.session(func(ctx context.Context) int {
		active, _, err := a.store.PipelineKeys(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		if _, ok := active[name]; !ok {
			a.failf("no active key named %s; nothing was done (archivebot pipeline-key list shows them)", name)
			return 1
		}
		if setAvoid {
			if err := a.store.SetPipelineKeyAvoid(ctx, name, avoid); err != nil {
				return a.refusal("", err)
			}
		}
		if setTargeted {
			if err := a.store.SetPipelineKeyTargetedOnly(ctx, name, targeted); err != nil {
				return a.refusal("", err)
			}
		}
		r, err := a.store.PipelineKeyRules(ctx, name)
		if err != nil {
			return a.refusal("", err)
		}
		if a.json {
			return a.writeJSON(map[string]any{"name": name, "avoid": nonNilStrings(r.Avoid),
				"avoid_reported": nonNilStrings(r.AvoidSelf), "targeted_only": r.TargetedOnly})
		}
		fmt.Fprintf(a.stdout, "Pipeline key %s: avoids %s (set by operators), %s (its own report); targeted only: %v.\n",
			name, listOrNone(r.Avoid), listOrNone(r.AvoidSelf), r.TargetedOnly)
		return 0
	})
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ",")
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
