package main

// The operator's commands that change a job: fail, abort, expire, requeue.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

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
		a.printNotice(*r.Notice)
	}
	return 0
}

// printNotice says which line was queued for which channel.
func (a *adminCmd) printNotice(n store.AdminNotice) {
	where := n.Channel
	if where == "" {
		where = "every channel"
	}
	fmt.Fprintf(a.stdout, "Queued for %s: %s\n", tc(where), tc(n.Text))
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
		// The line goes into the admin notices in the fail's own atomic
		// step (store.FailJobReported): a separate push after the fail was
		// lost when the command died in between (doc/reliability.md).
		var notice *store.AdminNotice
		job, err := a.store.FailJobReported(ctx, id, "failed by "+who, who, func(j *record.Job) store.AdminNotice {
			notice = &store.AdminNotice{Channel: j.StartedIn.Value,
				Text: fmt.Sprintf("Job %s for %s was failed by %s (operator): removed from its queue, it will not run any more.", id, j.URL.Value, who)}
			return *notice
		})
		if errors.Is(err, store.ErrJobFinished) {
			a.failf("job %s has already finished; there is nothing to fail", id)
			return 1
		}
		if err != nil {
			return a.refusal(id, err)
		}
		r := actionResult{Ident: id, URL: job.URL.Value, Result: "failed", Notice: notice}
		return a.report(r, fmt.Sprintf("Job %s for %s failed: removed from its queue, it will not run any more.", id, job.URL.Value))
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
		job := record.DecodeJob(id, res.Job)
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

// runReroute is `archivebot reroute IDENT [-avoid KEY]`: !reroute from
// the shell (doc/commands.md, Reroute) that also queues the line for the
// job's channel (the -json output has it as "notice"). A node serving the
// key that held the job hears of it through Redis (doc/pipeline-api.md, A
// ban shows itself).
func runReroute(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("reroute", stdout, stderr)
	avoid := a.fs.String("avoid", "", "the pipeline key that must avoid the job's site (default: the key running the job)")
	id, code := a.parseIdent(args, false)
	if code >= 0 {
		return code
	}
	if *avoid != "" && !wire.ValidKeyName(*avoid) {
		a.failf("-avoid: not a pipeline key name (letters, digits, '.', '_' and '-', at most %d characters); nothing was done", wire.MaxKeyName)
		return 2
	}
	return a.session(func(ctx context.Context) int {
		// The channel's line goes into the admin notices in the reroute's
		// own atomic step (store.RerouteReported), as fail's does; !reroute
		// needs none, its reply is in the channel.
		r, err := a.store.RerouteReported(ctx, id, *avoid, operator())
		var direct *store.DirectPipelineError
		var full *store.AvoidFullError
		switch {
		case errors.Is(err, store.ErrJobFinished), errors.Is(err, store.ErrAbortRequested),
			errors.Is(err, store.ErrNotRunningOrQueued), errors.Is(err, store.ErrRerouteNothing),
			errors.Is(err, store.ErrNoSuchPipelineKey), errors.As(err, &direct), errors.As(err, &full):
			a.failf("job %s: %v; nothing was done", id, err)
			return 1
		case err != nil:
			return a.refusal(id, err)
		}
		if a.json {
			return a.writeJSON(r)
		}
		fmt.Fprintln(a.stdout, tc(r.Sentence()))
		if r.Notice != nil {
			a.printNotice(*r.Notice)
		}
		return 0
	})
}
