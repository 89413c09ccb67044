package soak

// The revoke-waiting fault: a key revoked while one of its takes waits
// in the node's long-poll. The pipelines' own workers seldom wait (at the
// soak's load each holds a job most of the time, and a take finds one at
// once), so a revocation met only new takes, refused at the door, and
// never the path that ends a waiting take (pipelineapi/ops.go, the
// take's wait; store/scripts/take.lua, the key's check). So the soak
// takes with the pipeline's own key, as one more of its workers, from
// the pipeline's --pipeline queue (pending:NAME, NAME its nickname), which
// no user fills: the node has nothing to hand it and the take waits (up
// to wire.MaxTakeWaitMS). Once the API proxy has seen that take in flight
// for revokeSettle, the key is revoked; revokeJobAfter after the
// revocation returned, past invariant 3's grace, the prober queues a job
// to that queue (`!a URL --pipeline=NAME`). The node must have ended the
// take at the revocation (401 revoked_key), or refuse it the job; a node
// that lets it go on waiting and hands it the job is caught by invariant
// 3 (the proxy's record of the answer: a take by the key later than the
// grace after its revocation). The job is then the fresh key's: its name
// holds NAME, so the restarted pipeline takes it.

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// revokeSettle is how long the soak's take must have been in flight at
// the proxy before the revocation: the node answers at once when it has
// a job (or a refusal), so a take in flight this long waits.
var revokeSettle = 500 * time.Millisecond

// revokeJobAfter is how long after the revocation returned the job for
// the waiting take is queued: past invariant 3's grace (1 s).
var revokeJobAfter = 1500 * time.Millisecond

// revokeFindWait bounds the search for a waiting take (a leader change
// answers 503 for a while).
var revokeFindWait = 60 * time.Second

// flights are the API takes in flight at the proxy: key → take → when
// the proxy got it.
type flights struct {
	mu   sync.Mutex
	next int64
	by   map[string]map[int64]flight
}

type flight struct {
	takeID string
	since  time.Time
}

// flightKey carries a take's place in flights from its request to its
// answer.
type flightKey struct{}

type flightRef struct {
	key string
	n   int64
	at  time.Time
}

func (f *flights) begin(key, takeID string) flightRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]map[int64]flight{}
	}
	if f.by[key] == nil {
		f.by[key] = map[int64]flight{}
	}
	f.next++
	now := time.Now()
	f.by[key][f.next] = flight{takeID, now}
	return flightRef{key, f.next, now}
}

// end ends the flight of r's take, if it had one, and returns how long
// it was in flight (0: none known).
func (f *flights) end(r *http.Request) time.Duration {
	ref, ok := r.Context().Value(flightKey{}).(flightRef)
	if !ok {
		return 0
	}
	f.mu.Lock()
	delete(f.by[ref.key], ref.n)
	f.mu.Unlock()
	return time.Since(ref.at)
}

// waiting counts key's takes in flight for at least d, and says whether
// the one under takeID is among them.
func (f *flights) waiting(key, takeID string, d time.Duration) (n int, found bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.by[key] {
		if time.Since(fl.since) >= d {
			n++
			found = found || takeID != "" && fl.takeID == takeID
		}
	}
	return n, found
}

// waitedNum is a proxy record's Num: wait_ms (how long the take was in
// flight at the proxy, when known) and the pairs kv.
func waitedNum(waited time.Duration, kv ...any) map[string]float64 {
	m := map[string]float64{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(float64)
	}
	if waited > 0 {
		m["wait_ms"] = float64(waited.Microseconds()) / 1000
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// soakTake is the soak's own take with a pipeline's key.
type soakTake struct {
	takeID string
	asked  time.Time
	done   chan struct{}
	job    *wire.Job
	err    error
	at     time.Time // answered
}

// takeWaiting takes, with the key in file, from queue, until the proxy
// has seen one such take in flight for revokeSettle (it waits); it
// returns it, or why none waited within revokeFindWait. cancel ends it.
func (s *soak) takeWaiting(file, queue string) (t *soakTake, cancel func(), why string) {
	name, priv, err := readKeyFile(file)
	if err != nil {
		return nil, func() {}, fmt.Sprintf("the key file: %v", err)
	}
	c, err := client.New("http://"+s.api, name, priv, client.WithTakeRetry(client.Retry{Attempts: 1}))
	if err != nil {
		return nil, func() {}, err.Error()
	}
	ctx, cancel := context.WithCancel(context.Background())
	deadline := time.Now().Add(revokeFindWait)
	last := "none asked"
	for time.Now().Before(deadline) {
		t := &soakTake{takeID: client.NewTakeID(), asked: time.Now(), done: make(chan struct{})}
		go func() {
			defer close(t.done)
			t.job, t.err = c.Take(ctx, wire.TakeRequest{Queues: []string{queue}, WaitMS: wire.MaxTakeWaitMS, TakeID: t.takeID})
			t.at = time.Now()
		}()
		for {
			if _, ok := s.flights.waiting(name, t.takeID, revokeSettle); ok {
				return t, cancel, ""
			}
			select {
			case <-t.done:
			default:
				if time.Now().Before(deadline) {
					s.waitUntil(time.Now().Add(50 * time.Millisecond))
					continue
				}
				cancel() // in flight, never seen waiting
				<-t.done
			}
			break
		}
		last = t.outcome()
		s.note("revoke-waiting: the soak's take of %s from %s did not wait (%s); taking again", name, queue, last)
		s.waitUntil(time.Now().Add(time.Second))
	}
	cancel()
	return nil, func() {}, fmt.Sprintf("no take of %s from %s waited at the proxy within %v (the last: %s)", name, queue, revokeFindWait, last)
}

// outcome says how t was answered (once done).
func (t *soakTake) outcome() string {
	switch {
	case t.err != nil:
		return "refused: " + t.err.Error()
	case t.job != nil:
		return "handed job " + t.job.Ident
	default:
		return "answered with no job"
	}
}

// readKeyFile reads a pipeline's key file (`archivebot bridge -init`:
// "name: NAME", "private: BASE64 of the Ed25519 seed", "public: …" and
// comments, doc/pipeline-api.md); package bridge, which reads it for the
// pipelines, is a layer above the soak.
func readKeyFile(path string) (name string, priv ed25519.PrivateKey, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch k = strings.TrimSpace(k); {
		case !ok || strings.HasPrefix(k, "#"):
		case k == "name":
			name = strings.TrimSpace(v)
		case k == "private":
			seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(seed) != ed25519.SeedSize {
				return "", nil, fmt.Errorf("%s: private is not base64 of an Ed25519 seed", path)
			}
			priv = ed25519.NewKeyFromSeed(seed)
		}
	}
	if name == "" || priv == nil {
		return "", nil, fmt.Errorf("%s: no name or no private key", path)
	}
	return name, priv, nil
}

// keyFile is p's -key argument.
func (p *pipe) keyFile() string {
	for i, a := range p.args {
		if a == "-key" && i+1 < len(p.args) {
			return p.args[i+1]
		}
	}
	return ""
}

// revokedURL is the URL of the n-th job queued for a revoked key's
// waiting take in a run with seed seed: a fresh one.
func revokedURL(seed uint64, n int) string {
	return fmt.Sprintf("https://soak.example/revoked/%d/%d", seed, n)
}

// revokeWaiting is the revoke-waiting fault (see the top of the file).
// The pipeline is the one st.Pick names, as before; its key is revoked
// with a take waiting, its pipeline keeps asking for st.Dur, then gets a
// fresh key and starts again.
func (s *soak) revokeWaiting(st step, start, end func(string)) string {
	var api []*pipe
	for _, p := range s.pipes {
		if p.via == viaAPI {
			api = append(api, p)
		}
	}
	if len(api) == 0 {
		return "no API pipeline"
	}
	p := api[int(st.Pick*float64(len(api)))]
	old := p.key
	queue := "pending:" + p.name // the --pipeline NAME queue
	t, cancel, why := s.takeWaiting(p.keyFile(), queue)
	defer cancel()
	start(old)
	n, _ := s.flights.waiting(old, "", revokeSettle)
	if t != nil {
		s.note("revoke-waiting: revoking %s while its take %s from %s waits (in flight at the proxy for %v; %d of the key's takes in flight for %v or more)",
			old, t.takeID, queue, time.Since(t.asked).Round(time.Millisecond), n, revokeSettle)
	}
	out, err := exec.Command(s.bin, "pipeline-key", "-config", s.nodes[0].cfg, "revoke", old).CombinedOutput()
	revokedAt := time.Now()
	revokeErr := ""
	if err != nil {
		revokeErr = fmt.Sprintf("pipeline-key revoke %s: %v: %s", old, err, strings.TrimSpace(string(out)))
	} else {
		s.rec.Add(history.Event{T: revokedAt, Kind: history.Revoke, Target: old, Num: map[string]float64{"takes_waiting": float64(n)}})
	}
	// A job for the waiting take, past the grace: a node that let the
	// take go on waiting hands it over.
	s.waitUntil(revokedAt.Add(revokeJobAfter))
	answered := s.queueForRevoked(p.name, old)
	if t != nil {
		select {
		case <-t.done:
		case <-time.After(time.Until(t.asked.Add(time.Duration(wire.MaxTakeWaitMS)*time.Millisecond + 5*time.Second))):
			cancel()
			<-t.done
		}
		s.note("revoke-waiting: %s's take %s, waiting at the revocation, was %s %v after it", old, t.takeID, t.outcome(), t.at.Sub(revokedAt).Round(time.Millisecond))
	}
	// Its pipeline keeps asking with the revoked key for a while; then
	// the volunteer gets a fresh key and starts again.
	s.waitUntil(revokedAt.Add(st.Dur))
	s.killPipe(p, "its key was revoked")
	fresh := fmt.Sprintf("%s-r%d", p.name, p.gen)
	file := s.newKey(fresh, p.uid)
	p.key = fresh
	for i, a := range p.args {
		if a == "-key" {
			p.args[i+1] = file
		}
	}
	end(old)
	<-answered
	if revokeErr != "" {
		return revokeErr
	}
	return why
}

// queueForRevoked types, as the prober, an !a of a fresh URL for the
// pipeline name's queue (the revoked key's and its successor's), and
// returns a channel closed once its answer came (the Reply) or replyWait
// ran out.
func (s *soak) queueForRevoked(name, key string) <-chan struct{} {
	s.revokeJobs++
	url := revokedURL(s.seed, s.revokeJobs)
	text := "!a " + url + " --pipeline=" + name
	ident := s.jobs.sent(url)
	id, sent := s.send(s.prober, text, history.Event{})
	s.t.Logf("%s %s revoked, its waiting take's queue gets %s (%s)", time.Now().Format("15:04:05"), key, text, ident)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, ok := s.awaitReply(s.prober, id, sent, replyWait)
		if ok && strings.HasPrefix(r, "Queued ") && ident != "" {
			s.jobs.ack(ident)
		}
	}()
	return done
}
