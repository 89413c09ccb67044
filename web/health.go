package web

import (
	"context"
	"net/http"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
)

// handleHealthz is GET /healthz: the process is alive and serving. No
// Redis round trip.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// check is one line of /readyz.
type check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// serviceCheck is a background service's line of /readyz.
type serviceCheck struct {
	OK          bool       `json:"ok"`
	Interval    string     `json:"interval"`
	LastSuccess *time.Time `json:"last_success"`
	LastError   string     `json:"last_error,omitempty"`
}

// leaderInfo is /readyz's view of the leader lease (ha.enabled only).
type leaderInfo struct {
	Node       string  `json:"node"`
	Token      int64   `json:"token"`
	AgeSeconds float64 `json:"age_seconds"`
}

type readyBody struct {
	Ready    bool                    `json:"ready"`
	Role     string                  `json:"role,omitempty"`
	Leader   *leaderInfo             `json:"leader,omitempty"`
	Redis    check                   `json:"redis"`
	Clock    *check                  `json:"clock,omitempty"`
	Stream   *check                  `json:"stream,omitempty"`
	Note     string                  `json:"note,omitempty"`
	IRC      check                   `json:"irc"`
	Services map[string]serviceCheck `json:"services"`
}

// handleReadyz is GET /readyz: 200 when Redis answers, IRC is connected
// (or the console is the front end) and every background service had a
// successful cycle within three of its intervals (a service that has not
// run yet counts from its start); 503 otherwise. The body says which check
// failed. Redis: one PING (2-second timeout). Under ha.enabled a standby
// is ready to serve viewers (and to take over) when Redis answers and its
// stream reads the relay; its body says it is not the leader ("role",
// "note"). See doc/operating.md, One address for every node.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	b := readyBody{Ready: true, Services: map[string]serviceCheck{}}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		b.Redis = check{Detail: err.Error()}
	} else {
		b.Redis = check{OK: true}
	}
	switch {
	case s.opt.IRCConnected == nil:
		b.IRC = check{OK: true, Detail: "console mode"}
	case s.opt.IRCConnected():
		b.IRC = check{OK: true, Detail: "connected"}
	default:
		b.IRC = check{Detail: "not connected"}
	}
	now := s.now()
	if s.opt.ClockProblem != nil {
		// A node whose clock is off does not lead: not ready to take over.
		if p := s.opt.ClockProblem(); p != "" {
			b.Clock = &check{Detail: p}
			b.Ready = false
		} else {
			b.Clock = &check{OK: true}
		}
	}
	if s.opt.Relay != nil {
		// The node's live stream reads the leader's relay: a node that
		// cannot serves its viewers a stream that stopped.
		if ok, why := s.opt.Relay(); ok {
			b.Stream = &check{OK: true, Detail: "reading the leader's relay"}
		} else {
			b.Stream = &check{Detail: "cannot read the leader's relay: " + why}
			b.Ready = false
		}
	}
	if s.opt.Role != nil {
		b.Role = s.opt.Role()
		if h, ok, err := s.store.Leader(ctx); err == nil && ok {
			b.Leader = &leaderInfo{Node: h.Node, Token: h.Token, AgeSeconds: now.Sub(h.Acquired).Seconds()}
		}
		if b.Role == "standby" {
			// No IRC, no services: ready to take over if Redis answers.
			b.IRC = check{OK: true, Detail: "standby: the leader holds IRC"}
			b.Note = "not the leader: serves viewers read-only (dashboard, web API, live streams); commands and dashboard actions are the leader's"
			b.Ready = b.Ready && b.Redis.OK
			status := http.StatusOK
			if !b.Ready {
				status = http.StatusServiceUnavailable
			}
			writeJSON(w, status, b)
			return
		}
	}
	for _, svc := range metrics.Services() {
		c := serviceCheck{Interval: svc.Interval.String(), LastError: svc.LastError}
		since := svc.Since
		if !svc.LastSuccess.IsZero() {
			t := svc.LastSuccess.UTC()
			c.LastSuccess = &t
			since = svc.LastSuccess
		}
		c.OK = svc.Interval <= 0 || now.Sub(since) <= 3*svc.Interval
		b.Services[svc.Name] = c
		b.Ready = b.Ready && c.OK
	}
	b.Ready = b.Ready && b.Redis.OK && b.IRC.OK
	status := http.StatusOK
	if !b.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, b)
}
