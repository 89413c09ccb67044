package main

// The operator's read commands on jobs: jobs (the list) and job (one job).

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// jobRow is one line of `archivebot jobs`.
type jobRow struct {
	Ident     string `json:"ident"`
	State     string `json:"state"`
	Queue     string `json:"queue"`
	Position  int64  `json:"position,omitempty"`
	URL       string `json:"url"`
	StartedBy string `json:"started_by"`
	StartedIn string `json:"started_in"`
	// UNIX seconds, integers as in the web API (/jobs).
	QueuedAt  *int64 `json:"queued_at,omitempty"`
	StartedAt *int64 `json:"started_at,omitempty"`
	Pipeline  string `json:"pipeline_id,omitempty"`
	Depth     string `json:"fetch_depth,omitempty"`
	Note      string `json:"note,omitempty"`
}

func runJobs(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("jobs", stdout, stderr)
	queue := a.fs.String("queue", "", "only jobs of this queue (pending, pending-ao, pending-large, pending:NAME, working)")
	state := a.fs.String("state", "", "only jobs in this state: queued or running")
	pipeline := a.fs.String("pipeline", "", "only jobs running on this pipeline (its key, pipeline:…, or the id after it)")
	user := a.fs.String("user", "", "only jobs queued by this nick")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	if *state != "" && *state != record.StateQueued.String() && *state != record.StateRunning.String() {
		a.failf("-state must be queued or running, got %q", *state)
		return 2
	}
	return a.session(func(ctx context.Context) int {
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		pipeKey := pipelineKey(*pipeline)
		rows := []jobRow{}
		for _, j := range jobs {
			r := jobRow{Ident: j.Ident, Queue: j.Queue, Position: j.Position, State: j.State().String(),
				URL: j.Job.URL.Value, StartedBy: j.Job.StartedBy.Value, StartedIn: j.Job.StartedIn.Value,
				QueuedAt: unixField(j.Job.QueuedAt), StartedAt: unixField(j.Job.StartedAt), Pipeline: j.Job.PipelineID.Value,
				Depth: j.Job.FetchDepth.Value, Note: j.Job.Note.Value}
			switch {
			case *queue != "" && r.Queue != *queue,
				*state != "" && r.State != *state,
				*pipeline != "" && r.Pipeline != pipeKey,
				*user != "" && !strings.EqualFold(r.StartedBy, *user):
				continue
			}
			rows = append(rows, r)
		}
		if code, done := a.listed(rows, len(rows), "No jobs."); done {
			return code
		}
		tw := a.table()
		fmt.Fprintln(tw, "IDENT\tSTATE\tQUEUE\tPOS\tAGE\tBY\tPIPELINE\tURL")
		now := time.Now()
		for _, r := range rows {
			pos, since := "", r.QueuedAt
			if r.Position > 0 {
				pos = strconv.FormatInt(r.Position, 10)
			}
			if r.State == "running" {
				since = r.StartedAt
			}
			// Every field but pos and age is what Redis holds: cleaned.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tc(r.Ident), r.State, tc(r.Queue), pos, age(now, since),
				tc(r.StartedBy), tc(strings.TrimPrefix(r.Pipeline, store.PipelinePrefix)), tc(r.URL))
		}
		tw.Flush()
		return 0
	})
}

// tc makes a field read from Redis safe to print on the operator's
// terminal: pipelines write most of what the tables show, and an escape
// sequence in a title, a nickname or a URL must not reach the terminal
// (title changes, screen clears, forged rows).
func tc(s string) string { return text.Terminal(s) }

// pipelineKey turns a pipeline id or key into the key.
func pipelineKey(s string) string {
	if s == "" || strings.HasPrefix(s, store.PipelinePrefix) {
		return s
	}
	return store.PipelinePrefix + s
}

// unixField reads a UNIX time field (seconds, maybe with a fraction) as
// whole seconds; nil when it is missing or not a number.
func unixField(v record.Number) *int64 {
	if !v.OK || v.Float <= 0 {
		return nil
	}
	return v.Ptr()
}

// age writes how long ago a UNIX time was.
func age(now time.Time, unix *int64) string {
	if unix == nil {
		return "-"
	}
	d := now.Sub(time.Unix(*unix, 0))
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// jobView is `archivebot job --json`.
type jobView struct {
	Ident    string            `json:"ident"`
	URL      string            `json:"url"`
	State    string            `json:"state"`
	Queue    string            `json:"queue,omitempty"`
	Position int64             `json:"position,omitempty"`
	QueueLen int64             `json:"queue_length,omitempty"`
	Working  bool              `json:"working"`
	Origin   string            `json:"origin_queue,omitempty"`
	TTL      *float64          `json:"expires_in_seconds,omitempty"`
	Fields   map[string]string `json:"fields,omitempty"`
	Ignores  []string          `json:"ignores"`
	Failure  *failureView      `json:"failure,omitempty"`
	Pipeline *pipelineView     `json:"pipeline,omitempty"`
}

type failureView struct {
	Reason   string            `json:"reason"`
	FailedBy string            `json:"failed_by"`
	FailedAt float64           `json:"failed_at"`
	Queue    string            `json:"queue"`
	Job      map[string]string `json:"job,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
}

func runJob(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("job", stdout, stderr)
	id, code := a.parseIdent(args, true)
	if code >= 0 {
		return code
	}
	return a.session(func(ctx context.Context) int {
		d, err := a.store.JobDetail(ctx, id)
		if err != nil {
			return a.refusal(id, err)
		}
		if d == nil {
			return a.refusal(id, store.ErrNoJob)
		}
		v := jobView{Ident: id, Queue: d.Queue, Position: d.Position, QueueLen: d.QueueLen, Working: d.Working, Ignores: d.Ignores}
		if v.Ignores == nil {
			v.Ignores = []string{}
		}
		if v.Origin, err = a.store.Origin(ctx, id); err != nil {
			return a.refusal(id, err)
		}
		if d.Job != nil {
			v.Fields, v.URL, v.State = d.Job.Fields, d.Job.URL.Value, d.State().String()
			if d.TTL >= 0 {
				s := d.TTL.Seconds()
				v.TTL = &s
			}
			if p := d.Job.PipelineID.Value; p != "" {
				pl, err := a.store.GetPipeline(ctx, p)
				if err != nil {
					return a.refusal(id, err)
				}
				v.Pipeline = &pipelineView{Key: p, Gone: pl == nil}
				if pl != nil {
					v.Pipeline.fill(pl, time.Now(), a.cfg.Notifier.PipelineSilentAfter.Duration)
				}
			}
		}
		if f := d.Failure; f != nil {
			v.Failure = &failureView{Reason: f.Reason, FailedBy: f.FailedBy, FailedAt: f.FailedAt, Queue: f.Queue, Job: f.Job, Extra: f.Extra}
			if d.Job == nil {
				v.State, v.URL = record.StateFailed.String(), f.URL
			}
		}
		if a.json {
			return a.writeJSON(v)
		}
		tw := a.table()
		line := func(k, val string) {
			if val != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", k, tc(val))
			}
		}
		line("ident", v.Ident)
		line("url", v.URL)
		line("state", v.State)
		if v.Queue != "" {
			line("queue", fmt.Sprintf("%s, position %d of %d (1 runs next)", v.Queue, v.Position, v.QueueLen))
		}
		if v.Working {
			line("working", "yes")
		}
		line("origin queue", v.Origin)
		if v.TTL != nil {
			line("expires in", time.Duration(*v.TTL*float64(time.Second)).Round(time.Second).String())
		}
		if p := v.Pipeline; p != nil {
			desc := p.Key + " (gone: no record)"
			if !p.Gone {
				desc = fmt.Sprintf("%s %q, last report %s ago", p.Key, p.Nickname, time.Duration(p.AgeSeconds*float64(time.Second)).Round(time.Second))
				if p.Silent {
					desc += " (silent)"
				}
			}
			line("pipeline", desc)
		}
		if f := v.Failure; f != nil {
			line("failed", fmt.Sprintf("%s, by %s, at %s, from %s", f.Reason, f.FailedBy,
				time.Unix(int64(f.FailedAt), 0).UTC().Format(time.RFC3339), f.Queue))
		}
		keys := make([]string, 0, len(v.Fields))
		for k := range v.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "  %s:\t%s\n", tc(k), tc(v.Fields[k]))
		}
		fmt.Fprintf(tw, "ignores:\t%d patterns\n", len(v.Ignores))
		for _, p := range v.Ignores {
			fmt.Fprintf(tw, "  \t%s\n", tc(p))
		}
		tw.Flush()
		return 0
	})
}
