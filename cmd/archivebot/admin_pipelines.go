package main

// The operator's commands on pipelines: pipelines, reap-pipeline.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// pipelineView is one pipeline of `archivebot pipelines --json`.
type pipelineView struct {
	Key        string            `json:"key"`
	Nickname   string            `json:"nickname,omitempty"`
	Version    string            `json:"version,omitempty"`
	Hostname   string            `json:"hostname,omitempty"`
	Status     string            `json:"status,omitempty"`
	TS         float64           `json:"ts,omitempty"`
	AgeSeconds float64           `json:"age_seconds,omitempty"`
	Silent     bool              `json:"silent"`
	Gone       bool              `json:"gone,omitempty"`
	Jobs       []string          `json:"jobs,omitempty"`
	Fields     map[string]string `json:"fields,omitempty"`
}

func (v *pipelineView) fill(p *store.Pipeline, now time.Time, silentAfter time.Duration) {
	v.Key, v.Fields = p.Key, p.Fields
	v.Nickname, v.Version, v.Hostname, v.Status = p.Fields["nickname"], p.Fields["version"], p.Fields["hostname"], p.Fields["status"]
	v.TS, _ = strconv.ParseFloat(p.Fields["ts"], 64)
	if v.TS > 0 {
		v.AgeSeconds = max(0, now.Sub(time.Unix(int64(v.TS), 0)).Seconds())
	}
	v.Silent = v.TS == 0 || time.Duration(v.AgeSeconds*float64(time.Second)) > silentAfter
}

func runPipelines(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runNoArgs("pipelines", args, stdout, stderr, func(ctx context.Context, a *adminCmd) int {
		pls, err := a.store.Pipelines(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		byPipe := map[string][]string{}
		for _, j := range jobs {
			if p := j.Job.PipelineID.Value; j.Queue == store.KeyWorking && p != "" {
				byPipe[p] = append(byPipe[p], j.Ident)
			}
		}
		now := time.Now()
		views := []pipelineView{}
		for _, p := range pls {
			var v pipelineView
			v.fill(p, now, a.cfg.Notifier.PipelineSilentAfter.Duration)
			v.Jobs = byPipe[p.Key]
			delete(byPipe, p.Key)
			views = append(views, v)
		}
		// Jobs naming a pipeline that has no record: a pipeline that is gone.
		gone := make([]string, 0, len(byPipe))
		for k := range byPipe {
			gone = append(gone, k)
		}
		slices.Sort(gone)
		for _, k := range gone {
			views = append(views, pipelineView{Key: k, Gone: true, Silent: true, Jobs: byPipe[k]})
		}
		if code, done := a.listed(views, len(views), "No pipelines."); done {
			return code
		}
		tw := a.table()
		fmt.Fprintln(tw, "PIPELINE\tNICKNAME\tVERSION\tHOST\tSTATUS\tLAST REPORT\tJOBS")
		for _, v := range views {
			last := "-"
			switch {
			case v.Gone:
				last = "gone (no record)"
			case v.TS > 0:
				last = time.Duration(v.AgeSeconds*float64(time.Second)).Round(time.Second).String() + " ago"
				if v.Silent {
					last += " (silent)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tc(strings.TrimPrefix(v.Key, store.PipelinePrefix)),
				tc(v.Nickname), tc(v.Version), tc(v.Hostname), tc(v.Status), last, tc(strings.Join(v.Jobs, " ")))
		}
		tw.Flush()
		return 0
	})
}

// reapResult is `archivebot reap-pipeline --json`.
type reapResult struct {
	Pipeline string         `json:"pipeline"`
	Failed   []actionResult `json:"failed"`
	// Removed reports whether the pipeline's record was deleted.
	Removed bool `json:"removed"`
}

func runReapPipeline(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("reap-pipeline", stdout, stderr)
	force := a.fs.Bool("force", false, "reap it even though it still reports")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	key := pipelineKey(pos[0])
	hex := strings.TrimPrefix(key, store.PipelinePrefix)
	if hex == "" || strings.Trim(hex, "0123456789abcdef") != "" {
		a.failf("%q is not a pipeline id (pipeline:<md5hex> or the hex after it; archivebot pipelines lists them)", pos[0])
		return 2
	}
	return a.session(func(ctx context.Context) int {
		silent := a.cfg.Notifier.PipelineSilentAfter.Duration
		p, err := a.store.GetPipeline(ctx, key)
		if err != nil {
			return a.refusal("", err)
		}
		if p != nil && !*force {
			var v pipelineView
			v.fill(p, time.Now(), silent)
			if !v.Silent {
				a.failf("pipeline %s (%q) still reports (last %s ago); nothing was done. Use -force to reap it anyway",
					key, v.Nickname, time.Duration(v.AgeSeconds*float64(time.Second)).Round(time.Second))
				return 1
			}
		}
		jobs, err := a.store.ActiveJobs(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		who := operator()
		res := reapResult{Pipeline: key, Failed: []actionResult{}}
		status := 0
		for _, j := range jobs {
			if j.Queue != store.KeyWorking || j.Job.PipelineID.Value != key {
				continue
			}
			// The line is queued in the fail's own atomic step
			// (store.FailJobReported), so it is said at least once.
			var notice *store.AdminNotice
			job, err := a.store.FailJobReported(ctx, j.Ident, fmt.Sprintf("pipeline %s is gone; failed by %s", hex, who), who,
				func(job *record.Job) store.AdminNotice {
					notice = &store.AdminNotice{Channel: job.StartedIn.Value,
						Text: fmt.Sprintf("Job %s for %s was failed by %s (operator): its pipeline %s is gone.", j.Ident, job.URL.Value, who, hex)}
					return *notice
				})
			if errors.Is(err, store.ErrJobFinished) || errors.Is(err, store.ErrNoJob) {
				continue // it ended meanwhile
			}
			if err != nil {
				a.refusal(j.Ident, err)
				status = 1
				continue
			}
			r := actionResult{Ident: j.Ident, URL: job.URL.Value, Result: "failed", Notice: notice}
			res.Failed = append(res.Failed, r)
		}
		removed, err := a.store.RemovePipeline(ctx, key, silent, *force)
		if err != nil {
			a.failf("the jobs were failed, but the pipeline record stays: %v", err)
			status = 1
		}
		if p == nil && !removed && len(res.Failed) == 0 && status == 0 {
			// Reaped already (or a typo): nothing to fail, nothing to remove.
			a.failf("no pipeline %s: it has no record and no running job names it (reaped already? archivebot pipelines lists them); nothing was done", key)
			return 1
		}
		res.Removed = removed
		if a.json {
			if a.writeJSON(res) != 0 {
				return 1
			}
			return status
		}
		for _, r := range res.Failed {
			fmt.Fprintf(stdout, "Failed job %s for %s.\n", tc(r.Ident), tc(r.URL))
		}
		fmt.Fprintf(stdout, "Pipeline %s: %d jobs failed; record removed: %v.\n", key, len(res.Failed), removed)
		return status
	})
}
