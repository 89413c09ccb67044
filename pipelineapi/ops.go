package pipelineapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/sitematch"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// allowedQueue reports whether key name may take from queue.
func allowedQueue(name, queue string) bool {
	switch queue {
	case store.KeyPending, store.KeyPendingAO, store.KeyPendingLarge:
		return true
	}
	n, ok := strings.CutPrefix(queue, store.PendingNamedPrefix)
	return ok && n != "" && strings.Contains(name, n)
}

// candidateQueues is upstream's candidate_queues for key name: its
// pending:NAME queues (NAME a substring of the key name, sorted),
// pending-large if large, pending unless ao-only, pending-ao.
func (s *Server) candidateQueues(req *request, tr wire.TakeRequest) ([]string, *refusal) {
	var out []string
	if !tr.AOOnly {
		named, err := s.store.NamedQueues(req.r.Context())
		if err != nil {
			return nil, storeRefusal(err)
		}
		for _, q := range named {
			if allowedQueue(req.key, q) && strings.HasPrefix(q, store.PendingNamedPrefix) {
				out = append(out, q)
			}
		}
		sort.Strings(out)
	}
	if tr.Large {
		out = append(out, store.KeyPendingLarge)
	}
	if !tr.AOOnly {
		out = append(out, store.KeyPending)
	}
	return append(out, store.KeyPendingAO), nil
}

func (s *Server) take(req *request) (any, *refusal) {
	var tr wire.TakeRequest
	if rf := decode(req.body, &tr); rf != nil {
		return nil, rf
	}
	if tr.WaitMS < 0 || tr.WaitMS > wire.MaxTakeWaitMS {
		return nil, refuse(http.StatusBadRequest, "bad_request", fmt.Sprintf("wait_ms must be 0 to %d", wire.MaxTakeWaitMS))
	}
	if tr.TakeID != "" && !wire.ValidTakeID(tr.TakeID) {
		return nil, refuse(http.StatusBadRequest, "bad_request",
			fmt.Sprintf("take_id must be %d to %d characters of A-Z a-z 0-9 _ - (or left out)", wire.MinTakeID, wire.MaxTakeID))
	}
	if len(tr.Queues) > 32 {
		return nil, refuse(http.StatusBadRequest, "bad_request", "at most 32 queues")
	}
	for _, q := range tr.Queues {
		if !allowedQueue(req.key, q) {
			return nil, refuse(http.StatusForbidden, "forbidden_queue",
				fmt.Sprintf("key %s may not take from %q (pending, pending-ao, pending-large, or pending:NAME with NAME in the key name)", req.key, q))
		}
	}
	if err := req.t.loadHeld(req.r.Context(), req.key); err != nil {
		return nil, storeRefusal(err)
	}
	// The key as verified: the take script takes nothing once it is
	// revoked or replaced in Redis, and a revocation the node sees ends
	// the wait at once.
	revoked := refuse(http.StatusUnauthorized, "revoked_key", "key "+req.key+" was revoked or replaced while the take waited")
	text := req.t.keyText(req.key)
	if p := pubKeyOf(text); p == nil || !p.Equal(req.pub) {
		return nil, revoked
	}
	req.t.mu.Lock()
	gone := req.t.keyStateLocked(req.key).gone
	req.t.mu.Unlock()
	ctx := req.r.Context()
	deadline := time.Now().Add(time.Duration(tr.WaitMS) * time.Millisecond)
	if d := s.opt.WriteTimeout; d > 0 && tr.WaitMS > 0 {
		// The answer may go out after the wait.
		http.NewResponseController(req.w).SetWriteDeadline(deadline.Add(d))
	}
	waiting := false
	defer func() {
		if waiting {
			req.t.mu.Lock()
			req.t.keyStateLocked(req.key).waiting--
			req.t.mu.Unlock()
		}
	}()
	for {
		queues := tr.Queues
		if len(queues) == 0 {
			var rf *refusal
			if queues, rf = s.candidateQueues(req, tr); rf != nil {
				return nil, rf
			}
		}
		// Asked before the look: a job queued after it wakes the wait.
		woke := s.store.JobsQueued()
		j, err := s.store.APITakeID(ctx, req.key, text, tr.TakeID, queues)
		if errors.Is(err, store.ErrKeyRevoked) {
			return nil, revoked
		}
		if err != nil {
			return nil, storeRefusal(err)
		}
		if j != nil {
			return s.taken(req, j), nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return wire.TakeResponse{}, nil
		}
		if !waiting {
			req.t.mu.Lock()
			ks := req.t.keyStateLocked(req.key)
			if n := s.opt.MaxWaitingTakes; n > 0 && ks.waiting >= n {
				req.t.mu.Unlock()
				return nil, &refusal{status: http.StatusTooManyRequests, code: "rate_limited", metric: "waiting_takes",
					reason:     fmt.Sprintf("key %s has %d takes waiting for a job; at most %d (pipelines.max_waiting_takes): retry, or take with wait_ms 0", req.key, ks.waiting, n),
					retryAfter: 1}
			}
			ks.waiting++
			waiting = true
			req.t.mu.Unlock()
		}
		// Woken by a job queued through this node; the slow poll finds
		// jobs queued elsewhere (the admin CLI, another process).
		timer := time.NewTimer(min(wait, s.opt.TakePoll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return wire.TakeResponse{}, nil
		case <-req.t.ctx.Done():
			timer.Stop()
			return nil, storeRefusal(store.ErrFenced)
		case <-gone:
			timer.Stop()
			return nil, revoked
		case <-woke:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// taken records a job the key just took and answers it.
func (s *Server) taken(req *request, j *store.APIJob) wire.TakeResponse {
	t := req.t
	t.mu.Lock()
	t.jobs[j.Ident] = &heldJob{ident: j.Ident, key: req.key, rec: j.Record, logScore: j.Record.LogScore, pos: j.Pos}
	t.mu.Unlock()
	s.forgetRecent(j.Ident)
	t.settingsChanged(j.Ident)
	if j.Replayed {
		metrics.APITakeAnsweredAgain(req.key)
		s.log.Info("take answered again: its take_id already took the job", "key", req.key, "ident", j.Ident, "queue", j.Queue)
	} else {
		s.log.Info("job taken through the pipeline API", "key", req.key, "ident", j.Ident, "queue", j.Queue)
	}
	return wire.TakeResponse{Job: &wire.Job{Ident: j.Ident, Queue: j.Queue, PipelineID: store.APIPipelineKey(req.key),
		Fields: j.Record.Fields, Ignores: nonNil(j.Ignores)}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// withPending is the record with what the node has not written yet.
func (t *term) withPending(j *heldJob, fields map[string]string) map[string]string {
	out := maps.Clone(fields)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range j.incr {
		n, _ := strconv.ParseInt(out[k], 10, 64)
		out[k] = strconv.FormatInt(n+v, 10)
	}
	maps.Copy(out, j.set)
	return out
}

func (s *Server) readJob(req *request, ident string) (any, *refusal) {
	j, rf := req.t.held(req.r.Context(), req.key, ident)
	if rf != nil {
		return nil, rf
	}
	rj, err := s.store.APIReadJob(req.r.Context(), ident)
	var naj *store.NotAJobError
	if errors.As(err, &naj) || (err == nil && (rj == nil || rj.Record.PipelineID.Value != store.APIPipelineKey(req.key))) {
		req.t.release(j, lostReason(rj))
		return nil, refuse(http.StatusForbidden, "not_held", "job "+ident+" is not held by key "+req.key)
	}
	if err != nil {
		return nil, storeRefusal(err)
	}
	t := req.t
	t.mu.Lock()
	fields := t.withPending(j, rj.Record.Fields)
	j.rec = rj.Record
	t.mu.Unlock()
	return wire.Job{Ident: ident, PipelineID: store.APIPipelineKey(req.key), Fields: fields, Ignores: nonNil(rj.Ignores)}, nil
}

// Fields a pipeline may increment and set (doc/pipeline-api.md, Update a
// held job).
var (
	incrFields   = map[string]bool{"heartbeat": true, "bytes_downloaded": true, "items_downloaded": true, "items_queued": true}
	setFields    = map[string]bool{"warc_size": true}
	ignoredSets  = map[string]bool{"started_at": true, "pipeline_id": true}
	maxIncrement = int64(1) << 40
)

func (s *Server) update(req *request, ident string) (any, *refusal) {
	var u wire.UpdateRequest
	if rf := decode(req.body, &u); rf != nil {
		return nil, rf
	}
	if u.Heartbeat < 0 || u.Heartbeat > maxIncrement {
		return nil, refuse(http.StatusBadRequest, "bad_request", "heartbeat must be 0 to 2^40")
	}
	for k, v := range u.Incr {
		if !incrFields[k] {
			return nil, refuse(http.StatusForbidden, "forbidden_field", fmt.Sprintf("pipelines may not increment %q (only heartbeat, bytes_downloaded, items_downloaded, items_queued)", k))
		}
		if v < 0 || v > maxIncrement {
			return nil, refuse(http.StatusBadRequest, "bad_request", fmt.Sprintf("increment of %s must be 0 to 2^40", k))
		}
	}
	set := map[string]string{}
	for k, v := range u.Set {
		switch {
		case ignoredSets[k]:
		case setFields[k]:
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				return nil, refuse(http.StatusBadRequest, "bad_request", k+" must be a non-negative integer")
			}
			set[k] = v
		default:
			return nil, refuse(http.StatusForbidden, "forbidden_field", fmt.Sprintf("pipelines may not set %q (only warc_size)", k))
		}
	}
	if len(u.Log) > wire.MaxLogEntries {
		return nil, refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%d log entries; at most %d per request", len(u.Log), wire.MaxLogEntries))
	}
	docs := make([]string, len(u.Log))
	for i, e := range u.Log {
		if len(e) > wire.MaxLogEntry {
			return nil, refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("log entry %d is %d bytes; at most %d", i, len(e), wire.MaxLogEntry))
		}
		b := bytes.TrimSpace(e)
		if len(b) < 2 || b[0] != '{' {
			return nil, refuse(http.StatusBadRequest, "bad_request", fmt.Sprintf("log entry %d is not a JSON object", i))
		}
		if !utf8.Valid(b) {
			return nil, refuse(http.StatusBadRequest, "bad_request", fmt.Sprintf("log entry %d is not UTF-8", i))
		}
		docs[i] = string(b)
	}
	j, rf := req.t.held(req.r.Context(), req.key, ident)
	if rf != nil {
		return nil, rf
	}
	if rf := req.t.logBudget(req.key, len(docs)); rf != nil {
		return nil, rf
	}
	entries := make([]record.LogEntry, len(docs))
	t := req.t
	t.mu.Lock()
	for i, d := range docs {
		j.logScore++
		entries[i] = record.NewLogEntry(d, float64(j.logScore))
	}
	add := func(k string, v int64) {
		if v == 0 {
			return
		}
		if j.incr == nil {
			j.incr = map[string]int64{}
		}
		j.incr[k] += v
		j.dirty = true
	}
	add("heartbeat", u.Heartbeat)
	for k, v := range u.Incr {
		add(k, v)
	}
	if len(entries) > 0 {
		c, _ := record.CountLogEntries(entries)
		// The analyzer's seven counts exist once a job has entries, zero
		// or not, as the direct analyzer's HINCRBY leaves them.
		if j.incr == nil {
			j.incr = map[string]int64{}
		}
		for _, k := range []string{"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count"} {
			j.incr[k] += 0
		}
		add("r1xx", c.R1xx)
		add("r2xx", c.R2xx)
		add("r3xx", c.R3xx)
		add("r4xx", c.R4xx)
		add("r5xx", c.R5xx)
		add("runk", c.Runk)
		add("error_count", c.Errors)
	}
	if len(set) > 0 || len(entries) > 0 {
		if j.set == nil {
			j.set = map[string]string{}
		}
		maps.Copy(j.set, set)
		if len(entries) > 0 {
			j.set["log_score"] = strconv.FormatInt(j.logScore, 10)
		}
		j.dirty = true
	}
	snapshot := t.withPending(j, j.rec.Fields)
	res := wire.UpdateResponse{LogAccepted: len(entries), LogScore: j.logScore,
		SettingsAge: j.rec.SettingsAge, AbortRequested: j.rec.AbortRequested}
	banCheck := len(entries) > 0 && !j.banDecided && s.opt.BanCheck > 0
	url := j.rec.URL.Value
	t.mu.Unlock()
	if banCheck {
		s.banCheck(req, j, url, entries)
	}
	if len(entries) > 0 {
		metrics.APILogEntries(req.key, len(entries))
		s.addRecent(ident, docs, entries[0].Score)
		if sink := s.streamSink(); sink != nil {
			s.streamLog(sink, ident, snapshot, entries)
		}
	}
	return res, nil
}

// ending checks an abort or done request (an empty body, a job this key
// holds) and writes the job's pending log entries before it ends.
func (s *Server) ending(req *request, ident string) (*heldJob, *refusal) {
	if rf := decode(req.body, &struct{}{}); rf != nil {
		return nil, rf
	}
	j, rf := req.t.held(req.r.Context(), req.key, ident)
	if rf != nil {
		return nil, rf
	}
	if rf := s.flushBefore(req, j); rf != nil {
		return nil, rf
	}
	return j, nil
}

func (s *Server) abort(req *request, ident string) (any, *refusal) {
	j, rf := s.ending(req, ident)
	if rf != nil {
		return nil, rf
	}
	j.opMu.Lock()
	err := s.store.APIAbort(req.r.Context(), req.key, ident)
	j.opMu.Unlock()
	if rf := s.heldErr(req, j, err); rf != nil {
		return nil, rf
	}
	req.t.mu.Lock()
	aborted := maps.Clone(j.rec.Fields)
	if aborted == nil {
		aborted = map[string]string{}
	}
	aborted["aborted"] = "true"
	j.rec = record.DecodeJob(ident, aborted)
	req.t.mu.Unlock()
	return wire.DoneResponse{Ident: ident, Aborted: true}, nil
}

func (s *Server) done(req *request, ident string) (any, *refusal) {
	j, rf := s.ending(req, ident)
	if rf != nil {
		return nil, rf
	}
	j.opMu.Lock()
	aborted, err := s.store.APIDone(req.r.Context(), req.key, ident)
	j.opMu.Unlock()
	if rf := s.heldErr(req, j, err); rf != nil {
		return nil, rf
	}
	req.t.release(j, "")
	s.forgetRecent(ident) // /logs/recent shows running jobs only
	s.log.Info("job finished through the pipeline API", "key", req.key, "ident", ident, "aborted", aborted)
	return wire.DoneResponse{Ident: ident, Aborted: aborted}, nil
}

// flushBefore writes the job's pending counters before a done or abort.
func (s *Server) flushBefore(req *request, j *heldJob) *refusal {
	return s.heldErr(req, j, req.t.flush(req.r.Context(), j))
}

func (s *Server) heldErr(req *request, j *heldJob, err error) *refusal {
	var nh *store.NotHeldError
	if errors.As(err, &nh) {
		req.t.release(j, req.t.notHeldReason(req.r.Context(), j.ident, nh.Why))
		return refuse(http.StatusForbidden, "not_held", nh.Error())
	}
	if err != nil {
		return storeRefusal(err)
	}
	return nil
}

// Fields of the pipeline record the node writes itself.
var identityFields = map[string]bool{"id": true, "nickname": true, "api_key": true, "reported_nickname": true, "ts": true}

func (s *Server) report(req *request) (any, *refusal) {
	var p wire.PipelineReport
	if rf := decode(req.body, &p); rf != nil {
		return nil, rf
	}
	if len(p.Fields) > wire.MaxReportFields {
		return nil, refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%d fields; at most %d", len(p.Fields), wire.MaxReportFields))
	}
	fields := make(map[string]string, len(p.Fields)+5)
	for k, v := range p.Fields {
		if k == "" || len(k) > 64 || len(v) > 1024 {
			return nil, refuse(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("field %.64q: names 1 to 64 bytes, values at most 1024", k))
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, refuse(http.StatusBadRequest, "bad_request", fmt.Sprintf("field %.64q is not UTF-8", k))
		}
		if !identityFields[k] {
			fields[k] = v
		}
	}
	// The take rule's fields (doc/pipeline-api.md, The take rule): a
	// pipeline may say which sites it must not crawl, never that it is
	// targeted only (that is the operators' to set).
	if _, ok := p.Fields["targeted_only"]; ok {
		return nil, refuse(http.StatusForbidden, "forbidden_field",
			"targeted_only is set by the operators (archivebot pipeline-key set NAME targeted_only=1), not by a report")
	}
	if v, ok := p.Fields["avoid"]; ok {
		domains, err := sitematch.ParseList(v)
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "bad_request", "avoid: "+err.Error())
		}
		if rf := s.reportAvoid(req, domains); rf != nil {
			return nil, rf
		}
		delete(fields, "avoid")
	}
	id := store.APIPipelineKey(req.key)
	fields["id"] = id
	fields["nickname"] = req.key
	fields["api_key"] = req.key
	if n := p.Fields["nickname"]; n != "" {
		fields["reported_nickname"] = n
	}
	fields["ts"] = strconv.FormatInt(s.opt.Now().Unix(), 10)
	if err := s.store.APIReport(req.r.Context(), req.key, fields); err != nil {
		return nil, storeRefusal(err)
	}
	return wire.PipelineResponse{ID: id, Nickname: req.key}, nil
}

// reportAvoid writes the avoid rules a key's report gave, when they
// changed since this node last wrote them (reports come every second).
func (s *Server) reportAvoid(req *request, domains []string) *refusal {
	text := strings.Join(domains, ",")
	s.avoidMu.Lock()
	same := s.avoidSeen[req.key] == text && s.avoidSeen != nil
	s.avoidMu.Unlock()
	if same {
		return nil
	}
	if err := s.store.SetPipelineKeyAvoidSelf(req.r.Context(), req.key, domains); err != nil {
		return storeRefusal(err)
	}
	s.avoidMu.Lock()
	if s.avoidSeen == nil {
		s.avoidSeen = map[string]string{}
	}
	s.avoidSeen[req.key] = text
	s.avoidMu.Unlock()
	return nil
}

func (s *Server) unregister(req *request) (any, *refusal) {
	if err := s.store.APIUnregister(req.r.Context(), req.key); err != nil {
		return nil, storeRefusal(err)
	}
	return wire.PipelineResponse{ID: store.APIPipelineKey(req.key), Nickname: req.key}, nil
}

// jsonString is v as JSON (for SSE data lines).
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// streamLog hands entries to the live streams (through the sink, Redis
// pub/sub and every node's listener) as the firehose hands those it reads
// from Redis: the job's hash (with the counters not yet written) and the
// entries in score order.
func (s *Server) streamLog(sink LogSink, ident string, job map[string]string, entries []record.LogEntry) {
	sink.StreamLog(record.DecodeJob(ident, job), entries)
}

// banCheck adds the responses among entries to the job's ban check
// (doc/pipeline-api.md, A ban shows itself): one script, which queues the
// channel line once when the first BanCheck responses were all errors.
// Once the check has decided, the job's updates stop asking. A failed
// check is logged; the next update carries on counting.
func (s *Server) banCheck(req *request, j *heldJob, url string, entries []record.LogEntry) {
	var labels []string
	for _, e := range entries {
		if l := store.BanLabel(e); l != "" {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return
	}
	state, text, err := s.store.BanCheck(req.r.Context(), j.ident, req.key, store.SiteOf(url), s.opt.BanCheck, labels)
	if err != nil {
		s.log.Warn("ban check failed", "ident", j.ident, "err", err)
		return
	}
	if state == store.BanCounting {
		return
	}
	if state == store.BanPosted {
		metrics.BanLine()
		s.log.Info("ban line", "ident", j.ident, "key", req.key, "line", text)
	}
	req.t.mu.Lock()
	j.banDecided = true
	req.t.mu.Unlock()
}
