package soak

// Quiet points: no fault is active (faults run one at a time, between
// steps), the users' commands are held, the pipelines are frozen so
// nothing changes while the node is asked, and each of up to 50 jobs is
// probed on /jobs/IDENT, with !status IDENT, and in the dashboard's list
// (/jobs).

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// pipeProcs are the pipelines' processes now running.
func (s *soak) pipeProcs() []interface{ Signal(syscall.Signal) error } {
	var procs []interface{ Signal(syscall.Signal) error }
	for _, p := range s.pipes {
		p.mu.Lock()
		if p.proc != nil && !p.dead {
			procs = append(procs, p) // its Signal notes a stop and a thaw
		}
		p.mu.Unlock()
	}
	return procs
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func (s *soak) quietPoint(prober *irctest.User, r *rand.Rand, settle time.Duration) {
	s.gate.Lock()
	defer s.gate.Unlock()
	procs := s.pipeProcs()
	for _, p := range procs {
		p.Signal(syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range procs {
			p.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(settle + time.Second)
	s.rec.Add(history.Event{Kind: history.Quiet, Outcome: "start"})
	defer s.rec.Add(history.Event{Kind: history.Quiet, Outcome: "end"})
	l := s.leaderNode()
	if l == nil {
		s.note("quiet point without a leader: probes skipped")
		return
	}
	ids := s.jobs.sample(r, 50)
	c := http.Client{Timeout: 5 * time.Second}
	listed := map[string]string{}
	// The list is read once, here: each job's dashboard probe is stamped
	// with this time, not with when the loop below gets to it (up to 50
	// jobs later, seconds after; a job the reaper failed meanwhile read
	// as "stale").
	listedAt := time.Now()
	if resp, err := c.Get("http://" + l.web + "/jobs"); err == nil {
		var body struct {
			Jobs []struct {
				Ident string `json:"ident"`
				State string `json:"state"`
			} `json:"jobs"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		for _, j := range body.Jobs {
			listed[j.Ident] = j.State
		}
	}
	for _, id := range ids {
		state, raw := "absent", ""
		if resp, err := c.Get("http://" + l.web + "/jobs/" + id); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			raw = string(b)
			var v struct {
				State string `json:"state"`
			}
			if resp.StatusCode == 200 && json.Unmarshal(b, &v) == nil && v.State != "" {
				state = v.State
			}
		} else {
			state, raw = "error", err.Error()
		}
		s.rec.Add(history.Event{Kind: history.Probe, Via: "jobs_api", Ident: id, Outcome: state, Text: cut(raw, 500)})
		ls, ok := listed[id]
		if !ok {
			ls = "absent"
		}
		s.rec.Add(history.Event{T: listedAt, Kind: history.Probe, Via: "dashboard", Ident: id, Outcome: ls})
		prober.Mark()
		prober.Say(channel, "!status "+id)
		m, err := prober.WaitWithin(replyWait, "status", replyTo(prober.Nick))
		if err != nil {
			s.rec.Add(history.Event{Kind: history.Probe, Via: "status", Ident: id, Outcome: "timeout"})
			continue
		}
		text := strings.TrimPrefix(m.Params[1], prober.Nick+": ")
		s.rec.Add(history.Event{Kind: history.Probe, Via: "status", Ident: id, Outcome: statusState(text), Text: cut(text, 500)})
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// statusState reads the state a !status IDENT answer states (the checker
// has the raw text too).
func statusState(text string) string {
	l := strings.ToLower(text)
	switch {
	case strings.Contains(l, "no job") || strings.Contains(l, "unknown") || strings.Contains(l, "not found") || strings.Contains(l, "don't know"):
		return "absent"
	case strings.Contains(l, "failed"):
		return "failed"
	case strings.Contains(l, "aborted"):
		return "aborted"
	case strings.Contains(l, "finished") || strings.Contains(l, "completed"):
		return "finished"
	case strings.Contains(l, "in progress") || strings.Contains(l, "running"):
		return "running"
	case strings.Contains(l, "queued") || strings.Contains(l, "pending") || strings.Contains(l, "waiting"):
		return "queued"
	}
	return "other"
}
