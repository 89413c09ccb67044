package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
)

// !status
// !status IDENT
// !status URL
func runStatus(ctx context.Context, b *Bot, c *Call) error {
	if len(c.Args) == 0 {
		s, err := b.store.Summary(ctx)
		if err != nil {
			return err
		}
		// Upstream did not count pending-large at all; it is counted with
		// the other queues and named when it holds anything.
		other := fmt.Sprintf("%d pending in other queues", s.Named+s.Large)
		if s.Large > 0 {
			other += fmt.Sprintf(" (%d in pending-large)", s.Large)
		}
		c.Reply("Job status: %d completed, %d aborted, %d failed, %d in progress, %d pending, %d pending-ao, %s",
			s.Completed, s.Aborted, s.Failed, s.Working, s.Pending, s.PendingAO, other)
		return nil
	}
	arg := c.Args[0]
	if IsIdent(arg) {
		job, err := b.store.GetJob(ctx, arg)
		if err != nil {
			return err
		}
		if job == nil {
			return b.replyFailure(ctx, c, arg, func() { c.unknownJob(arg) })
		}
		return b.replyJob(ctx, c, job)
	}
	u, err := ident.Parse(arg)
	if err != nil || u.Host == "" {
		c.Refuse("Sorry, %s is neither a job ident nor a URL I understand.", arg)
		return nil
	}
	url := u.String()
	job, err := b.store.GetJob(ctx, ident.Of(url))
	if err != nil {
		return err
	}
	if job == nil {
		return b.replyFailure(ctx, c, ident.Of(url), func() {
			c.Refuse("Sorry, that URL has not been archived recently: no job for %s in the last 48 hours.", url)
		})
	}
	return b.replyJob(ctx, c, job)
}

// replyJob answers with the status of a job that has a record. A failed
// job's record says only why; its failure record (written by the same
// script) says who failed it and when, so that is the answer, the job's
// note added, from the first second on.
func (b *Bot) replyJob(ctx context.Context, c *Call, job *store.Job) error {
	if job.State() == store.StateFailed {
		f, err := b.store.GetFailure(ctx, job.Ident)
		if err != nil {
			return err
		}
		if f != nil {
			line := failureStatus(f)
			if n := job.Note.Value; n != "" {
				line += " Note: " + n
			}
			c.Reply("%s", line)
			return nil
		}
	}
	c.Reply("%s", jobStatus(job))
	return nil
}

// replyFailure answers with the failure record of id (kept 7 days after
// the job record is gone), or calls none when there is none.
func (b *Bot) replyFailure(ctx context.Context, c *Call, id string, none func()) error {
	f, err := b.store.GetFailure(ctx, id)
	if err != nil {
		return err
	}
	if f == nil {
		none()
		return nil
	}
	c.Reply("%s", failureStatus(f))
	return nil
}

// failureStatus is the one-line status of a failed job from its failure
// record: why, who or what failed it, when, and where it was.
func failureStatus(f *store.Failure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s <%s>.", f.Ident, f.URL)
	job := f.JobRecord()
	if by := job.StartedBy.Value; by != "" {
		fmt.Fprintf(&b, " Started by %s.", by)
	}
	fmt.Fprintf(&b, " Failed")
	if f.Reason != "" {
		fmt.Fprintf(&b, ": %s", f.Reason)
	}
	switch p, nick := job.PipelineID.Value, f.Extra["pipeline"]; {
	case f.FailedBy == "reaper" && nick != "":
		fmt.Fprintf(&b, " (reaped by the death timer with its pipeline %q, %s)", nick, p)
	case f.FailedBy == "reaper" && p != "":
		fmt.Fprintf(&b, " (reaped by the death timer with its pipeline %s)", p)
	case f.FailedBy == "reaper":
		b.WriteString(" (reaped by the death timer)")
	case nick != "":
		fmt.Fprintf(&b, " (it was on pipeline %q)", nick)
	}
	if f.FailedAt > 0 {
		at := time.Unix(int64(f.FailedAt), 0).UTC()
		fmt.Fprintf(&b, ", at %s", at.Format(time.DateTime+"Z"))
	}
	if f.Queue != "" {
		fmt.Fprintf(&b, ", while in %s", f.Queue)
	}
	b.WriteString(".")
	return b.String()
}

// jobStatus is the one-line status of a job.
func jobStatus(j *store.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s <%s>. Started by %s.", j.Ident, j.URL.Value, j.StartedBy.Value)
	switch j.State() {
	case store.StateQueued:
		b.WriteString(" In queue.")
		if j.AbortRequested {
			b.WriteString(" Abort requested.")
		}
	case store.StateRunning:
		p := news.JobProgress(j)
		fmt.Fprintf(&b, " In progress. %s", p)
		if c := p.Counts; c.R1xx+c.R2xx+c.R3xx+c.R4xx+c.R5xx+c.Runk > 0 {
			fmt.Fprintf(&b, " Responses: %d 2xx, %d 3xx, %d 4xx, %d 5xx, %d other.",
				c.R2xx, c.R3xx, c.R4xx, c.R5xx, c.R1xx+c.Runk)
		}
		if j.AbortRequested {
			b.WriteString(" Abort requested.")
		}
	case store.StateFinished:
		b.WriteString(" Completed.")
	case store.StateAborted:
		b.WriteString(" Aborted.")
	case store.StateFailed:
		b.WriteString(" Failed")
		if r := j.FailedReason.Value; r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
		b.WriteString(".")
	}
	if n := j.Note.Value; n != "" {
		fmt.Fprintf(&b, " Note: %s", n)
	}
	return b.String()
}

// !pending
func runPending(ctx context.Context, b *Bot, c *Call) error {
	queues, err := b.store.Queues(ctx, b.opts.PendingShown)
	if err != nil {
		return err
	}
	var total int64
	for _, q := range queues {
		total += q.Len
	}
	if total == 0 {
		c.Out.Private("No jobs are pending.")
		return nil
	}
	switch {
	case total == 1:
		c.Out.Private("1 pending job:")
	case len(queues) == 1:
		c.Out.Private(fmt.Sprintf("%d pending jobs:", total))
	default:
		c.Out.Private(fmt.Sprintf("%d pending jobs in %d queues, next to run first:", total, len(queues)))
	}
	for _, q := range queues {
		if len(queues) > 1 {
			c.Out.Private(fmt.Sprintf("%s (%d):", q.Name, q.Len))
		}
		for i, j := range q.Jobs {
			c.Out.Private(fmt.Sprintf("%d. %s (%s)", i+1, j.URL, j.Ident))
		}
		if more := q.Len - int64(len(q.Jobs)); more > 0 {
			c.Out.Private(fmt.Sprintf("... and %d more in %s.", more, q.Name))
		}
	}
	return nil
}

// !whereis IDENT
func runWhereis(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	job, err := b.job(ctx, c, id)
	if job == nil {
		return err
	}
	key := job.PipelineID.Value
	if key == "" {
		c.Reply("Job %s is not on a pipeline.", id)
		return nil
	}
	p, err := b.store.GetPipeline(ctx, key)
	if err != nil {
		return err
	}
	if p == nil {
		c.Reply("Job %s was taken by %s, which is no longer reporting.", id, key)
		return nil
	}
	c.Reply("Job %s is on pipeline \"%s\" (%s).", id, p.Nickname(), key)
	return nil
}
