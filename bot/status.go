package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
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
		if err := b.replyPauses(ctx, c, c.Reply); err != nil {
			return err
		}
		if n, err := b.store.LegacyPipelines(ctx); err != nil {
			return err
		} else if n > 0 {
			c.Reply("%s directly from Redis: limits not enforced for %s.", pipelinesTake(n), themOrIt(n))
		}
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
func (b *Bot) replyJob(ctx context.Context, c *Call, job *record.Job) error {
	if job.State() == record.StateFailed {
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
	line := jobStatus(job)
	if job.State() == record.StateQueued {
		w, err := b.store.WaitingOf(ctx, job.Ident, job.URL.Value)
		if err != nil {
			return err
		}
		line = strings.Replace(line, " In queue.", " "+WaitingLine(w), 1)
	}
	c.Reply("%s", line)
	return nil
}

// ordinal is 1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, 21st.
func ordinal(n int64) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// WaitingLine says where a queued job stands and what holds it:
// "In queue pending, 4th. Waiting: erin has 3 jobs running (limit 3)."
// When nothing holds it, upstream's "In queue." stands (its transcripts).
func WaitingLine(w *store.Waiting) string {
	if w.Paused == nil && !w.AtLimit() && !w.AllAvoid() && w.Legacy == 0 {
		return "In queue."
	}
	var b strings.Builder
	if w.Position > 0 {
		fmt.Fprintf(&b, "In queue %s, %s.", w.Queue, ordinal(w.Position))
	} else {
		fmt.Fprintf(&b, "In queue %s.", w.Queue)
	}
	if w.Paused != nil {
		b.WriteString(" " + PauseLine(*w.Paused))
	}
	if w.AtLimit() {
		jobs := "jobs"
		if w.Running == 1 {
			jobs = "job"
		}
		fmt.Fprintf(&b, " Waiting: %s has %d %s running (limit %d).", w.Nick, w.Running, jobs, w.Limit)
	}
	if w.AllAvoid() {
		fmt.Fprintf(&b, " Waiting: every pipeline avoids %s (%s).", w.AvoidRule, strings.Join(w.AvoidedBy, ", "))
	}
	if w.Legacy > 0 {
		fmt.Fprintf(&b, " %s directly from Redis: limits not enforced for %s.", pipelinesTake(w.Legacy), themOrIt(w.Legacy))
	}
	return b.String()
}

func pipelinesTake(n int) string {
	if n == 1 {
		return "1 pipeline takes"
	}
	return fmt.Sprintf("%d pipelines take", n)
}

func themOrIt(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
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
func failureStatus(f *record.Failure) string {
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
func jobStatus(j *record.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s <%s>. Started by %s.", j.Ident, j.URL.Value, j.StartedBy.Value)
	switch j.State() {
	case record.StateQueued:
		b.WriteString(" In queue.")
		if j.AbortRequested {
			b.WriteString(" Abort requested.")
		}
	case record.StateRunning:
		p := news.JobProgress(j)
		fmt.Fprintf(&b, " In progress. %s", p)
		if c := p.Counts; c.R1xx+c.R2xx+c.R3xx+c.R4xx+c.R5xx+c.Runk > 0 {
			fmt.Fprintf(&b, " Responses: %d 2xx, %d 3xx, %d 4xx, %d 5xx, %d other.",
				c.R2xx, c.R3xx, c.R4xx, c.R5xx, c.R1xx+c.Runk)
		}
		if j.AbortRequested {
			b.WriteString(" Abort requested.")
		}
	case record.StateFinished:
		b.WriteString(" Completed.")
	case record.StateAborted:
		b.WriteString(" Aborted.")
	case record.StateFailed:
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
	private := func(format string, a ...any) { c.Out.Private(fmt.Sprintf(format, a...)) }
	if err := b.replyPauses(ctx, c, private); err != nil {
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
		paused := ""
		if q.Paused != nil {
			paused = ", paused"
		}
		if len(queues) > 1 || paused != "" {
			c.Out.Private(fmt.Sprintf("%s (%d%s):", q.Name, q.Len, paused))
		}
		for i, j := range q.Jobs {
			c.Out.Private(fmt.Sprintf("%d. %s (%s)", i+1, j.URL, j.Ident))
		}
		if more := q.Len - int64(len(q.Jobs)); more > 0 {
			c.Out.Private(fmt.Sprintf("... and %d more in %s.", more, q.Name))
		}
	}
	if b.opts.PublicURL != "" {
		c.Out.Private("Every queue, live: " + strings.TrimRight(b.opts.PublicURL, "/") + "/pending")
	}
	return nil
}

// replyPauses says every pause, one line each, through say.
func (b *Bot) replyPauses(ctx context.Context, c *Call, say func(format string, a ...any)) error {
	ps, err := b.store.Pauses(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		say("%s", PauseLine(p))
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
