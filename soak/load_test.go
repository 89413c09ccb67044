package soak

// The load: scripted IRC users and the observer, dashboard viewers, and
// the fake Mastodon and Bluesky the feed posts to.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// ---------------------------------------------------------------------
// The runner's own list of jobs: what users queued (acknowledged), for
// picking targets of later commands and for the probes. The checker
// builds its model from the history alone.

type jobList struct {
	// window: how many of the latest acknowledged jobs commands pick
	// their target from (about the jobs that live at once: a change to
	// a job that already ended checks nothing).
	window int
	mu     sync.Mutex
	urls   map[string]string // ident → url, every URL sent
	acked  []string          // idents acknowledged with "Queued", in order
	isAck  map[string]bool
}

func newJobList(window int) *jobList {
	return &jobList{window: window, urls: map[string]string{}, isAck: map[string]bool{}}
}

func (j *jobList) urlOf(id string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.urls[id]
}

func (j *jobList) sent(url string) string {
	_, id, err := ident.FromURL(url)
	if err != nil {
		return ""
	}
	j.mu.Lock()
	j.urls[id] = url
	j.mu.Unlock()
	return id
}

func (j *jobList) ack(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.isAck[id] {
		j.isAck[id] = true
		j.acked = append(j.acked, id)
	}
}

// pick returns an acknowledged ident chosen by f in [0,1) among the
// latest window (most commands are about jobs that still live).
func (j *jobList) pick(f float64) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := len(j.acked)
	if n == 0 {
		return "zzznosuchjob"
	}
	w := min(n, j.window)
	return j.acked[n-w+int(f*float64(w))]
}

func (j *jobList) pickURL(f float64) string {
	id := j.pick(f)
	return j.urlOf(id)
}

// sample draws up to k acknowledged idents for a quiet point: half among
// the latest window (the jobs most likely live, whose acknowledged
// changes the probes can check), the rest among all the others.
func (j *jobList) sample(r *rand.Rand, k int) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	cut := max(0, len(j.acked)-j.window)
	recent, older := slices.Clone(j.acked[cut:]), slices.Clone(j.acked[:cut])
	r.Shuffle(len(recent), func(a, b int) { recent[a], recent[b] = recent[b], recent[a] })
	r.Shuffle(len(older), func(a, b int) { older[a], older[b] = older[b], older[a] })
	recent = recent[:min(len(recent), k/2)]
	out := append(recent, older[:min(len(older), k-len(recent))]...)
	return out
}

// ---------------------------------------------------------------------
// IRC users.

// cmdPlan is one command a user will send, drawn up front from the seed.
type cmdPlan struct {
	Kind  string  // a, ao, dup, bad, abort, ig, unig, delay, con, status, statusall, pending, fail, move, pause, resume
	F     float64 // picks the target job
	Think time.Duration
	N     int
}

var cmdWeights = []struct {
	kind string
	w    int
}{
	{"a", 22}, {"ao", 22}, {"dup", 5}, {"bad", 4}, {"abort", 5}, {"ig", 6}, {"unig", 3},
	{"delay", 5}, {"con", 4}, {"status", 10}, {"statusall", 3}, {"pending", 2}, {"fail", 2}, {"move", 4},
	// !pause and !resume (doc/commands.md; doc/protocol.md, Paused
	// queues): a pause is followed by the same user's !resume of the
	// same target 2-5 s later (runUser), so queues are paused a small
	// part of the run (ci scale, seed 1: 3 pauses, about 8 s of 120) and
	// never at the end; a lone !resume is mostly refused ("not paused"), now and then
	// it ends another user's pause early. The checker knows the paused
	// state (soak/check: no take of a job queued while its queue was
	// paused before the resume was sent; paused lists are queued).
	{"pause", 1}, {"resume", 1},
}

func planCommands(r *rand.Rand, n int, think time.Duration) []cmdPlan {
	total := 0
	for _, c := range cmdWeights {
		total += c.w
	}
	out := make([]cmdPlan, n)
	for i := range out {
		x := r.IntN(total)
		k := ""
		for _, c := range cmdWeights {
			if x < c.w {
				k = c.kind
				break
			}
			x -= c.w
		}
		out[i] = cmdPlan{Kind: k, F: r.Float64(), Think: time.Duration(r.Int64N(int64(think))) + think/4, N: r.IntN(1000)}
	}
	return out
}

var badInputs = []string{"!a", "!a notaurl", "!ao ftp://", "!a http://", "!abort", "!d zzz 1 2", "!con", "!ig", "!a https://soak.example/x --nosuchoption", "!move zzz sideways"}

// text makes the command line of c for user u (n: its running number).
func (s *soak) commandText(u string, n int, c cmdPlan) string {
	switch c.Kind {
	case "a", "ao":
		url := fmt.Sprintf("https://soak.example/%s/%d/%d", u, s.seed, n)
		s.jobs.sent(url)
		return "!" + c.Kind + " " + url
	case "dup":
		if url := s.jobs.pickURL(c.F); url != "" {
			return "!a " + url
		}
		return "!status"
	case "bad":
		return badInputs[c.N%len(badInputs)]
	case "abort":
		return "!abort " + s.jobs.pick(c.F)
	case "ig":
		return fmt.Sprintf("!ig %s soakpattern%d", s.jobs.pick(c.F), c.N%5)
	case "unig":
		return fmt.Sprintf("!unig %s soakpattern%d", s.jobs.pick(c.F), c.N%5)
	case "delay":
		return fmt.Sprintf("!d %s %d %d", s.jobs.pick(c.F), c.N, c.N+500)
	case "con":
		return fmt.Sprintf("!con %s %d", s.jobs.pick(c.F), 1+c.N%8)
	case "status":
		return "!status " + s.jobs.pick(c.F)
	case "statusall":
		return "!status"
	case "pending":
		return "!pending"
	case "fail":
		return "!fail " + s.jobs.pick(c.F)
	case "move":
		return "!move " + s.jobs.pick(c.F) + []string{" front", " back"}[c.N%2]
	case "pause":
		return "!pause " + pauseTarget(c.N) + " soak"
	case "resume":
		return "!resume " + pauseTarget(c.N)
	}
	return "!status"
}

// pauseTarget is the queue a !pause or !resume names: the two queues the
// users' jobs go to, and now and then every queue.
func pauseTarget(n int) string {
	return []string{"pending", "pending-ao", "pending", "pending-ao", "all"}[n%5]
}

// pauseHold is how long a user keeps the queue it paused paused: 2-5 s.
func pauseHold(n int) time.Duration { return 2*time.Second + time.Duration(n%3000)*time.Millisecond }

func isBot(nick string) bool {
	return strings.HasPrefix(strings.ToLower(nick), strings.ToLower(botNick))
}

// replyTo matches the bot's first line answering a command of nick: in
// the channel with "nick: ", or in private; not a notice the bot sends
// nick on its own (a job started, finished or silent), nor the second
// line of an earlier !a's answer.
func replyTo(nick string) func(ircmsg.Message) bool {
	prefix := nick + ": "
	return func(m ircmsg.Message) bool {
		if (m.Command != "PRIVMSG" && m.Command != "NOTICE") || len(m.Params) < 2 || !isBot(m.Nick()) {
			return false
		}
		text := m.Params[1]
		switch {
		case strings.EqualFold(m.Params[0], nick):
		case strings.EqualFold(m.Params[0], channel) && strings.HasPrefix(text, prefix):
			text = text[len(prefix):]
		default:
			return false
		}
		return !isNotice(text)
	}
}

// isNotice tells the bot's own notices to a user from answers.
func isNotice(text string) bool {
	return strings.HasPrefix(text, "Your job for ") || strings.Contains(text, " of your jobs finished") ||
		strings.Contains(text, "has had no heartbeat") || strings.HasPrefix(text, "Use !status ")
}

// replyWait bounds the wait for a reply; a longer wait is a timeout.
const replyWait = 10 * time.Second

// runUser sends u's planned commands one at a time until stop, each after
// its think time, recording Send and Reply.
func (s *soak) runUser(u *irctest.User, plan []cmdPlan, stop <-chan struct{}) {
	for i := 0; ; i++ {
		c := plan[i%len(plan)]
		select {
		case <-stop:
			return
		case <-time.After(c.Think):
		}
		s.gate.RLock()
		text := s.commandText(u.Nick, i, c)
		r, ok := s.command(u, text)
		if ok && (c.Kind == "a" || c.Kind == "ao") && strings.HasPrefix(r, "Queued ") {
			if f := strings.Fields(text); len(f) > 1 {
				if id := s.jobs.sent(f[1]); id != "" {
					s.jobs.ack(id)
				}
			}
		}
		s.gate.RUnlock()
		if c.Kind == "pause" && !(ok && (strings.HasPrefix(r, "Sorry") || strings.Contains(r, "Nothing was changed."))) {
			// The same user resumes what it paused (or may have: a
			// timeout, "Redis did not answer in time") a few seconds
			// later, even when the load is stopping: the drain at the
			// end needs every queue handed out again.
			time.Sleep(pauseHold(c.N))
			s.resume(u, pauseTarget(c.N))
		}
	}
}

// resume sends !resume target until the bot says it is resumed or not
// paused (someone else's !resume came first); "every queue is paused"
// (a single queue under a pause of all), a timeout or an error is tried
// again, 8 times at most.
func (s *soak) resume(u *irctest.User, target string) {
	for try := 0; try < 8; try++ {
		s.gate.RLock()
		r, ok := s.command(u, "!resume "+target)
		s.gate.RUnlock()
		if ok && (strings.HasPrefix(r, "Resumed ") || strings.Contains(r, " is not paused.")) {
			return
		}
		time.Sleep(2 * time.Second)
	}
	s.note("%s: !resume %s not acknowledged after 8 tries", u.Nick, target)
}

// command sends text as u and waits for its reply, recording Send and
// Reply; ok is false on a timeout. The caller holds s.gate read-locked.
func (s *soak) command(u *irctest.User, text string) (reply string, ok bool) {
	id, sent := s.send(u, text, history.Event{})
	return s.awaitReply(u, id, sent, replyWait)
}

// send types text in the channel as u and records the Send (with
// extra's Target and Fault: hold_test.go); the reply is awaitReply's.
func (s *soak) send(u *irctest.User, text string, extra history.Event) (id int64, sent time.Time) {
	id = s.nextID.Add(1)
	u.Mark()
	sent = time.Now()
	u.Say(channel, text)
	s.rec.Add(history.Event{T: sent, Kind: history.Send, Actor: u.Nick, Channel: channel, Text: text, ID: id, Target: extra.Target, Fault: extra.Fault})
	return id, sent
}

// awaitReply waits up to wait for the bot's answer to u's command id,
// sent at sent, and records the Reply (Outcome "timeout" when none came).
func (s *soak) awaitReply(u *irctest.User, id int64, sent time.Time, wait time.Duration) (reply string, ok bool) {
	m, err := u.WaitWithin(wait, "reply", replyTo(u.Nick))
	if err != nil {
		s.rec.Add(history.Event{Kind: history.Reply, Actor: u.Nick, Channel: channel, ID: id, Outcome: "timeout",
			Num: map[string]float64{"latency_ms": float64(wait.Milliseconds())}})
		return "", false
	}
	got := time.Now()
	r := strings.TrimPrefix(m.Params[1], u.Nick+": ")
	s.rec.Add(history.Event{T: got, Kind: history.Reply, Actor: u.Nick, Channel: m.Params[0], Text: r, ID: id,
		Num: map[string]float64{"latency_ms": float64(got.Sub(sent).Microseconds()) / 1000}})
	if strings.EqualFold(m.Params[0], u.Nick) {
		awaitRestOfAnswer(u, privateFromBot(u.Nick))
	}
	return r, true
}

// answerQuiet is how long no further line of a private answer must come
// before the answer counts as whole.
const answerQuiet = 1500 * time.Millisecond

// awaitRestOfAnswer reads the further lines of a private answer (a
// listing: !pending, !whereis… send several lines, paced by the bot's
// outbox) until answerQuiet passes without one, at most replyWait. A
// user types the next command after reading the answer; before, the
// next command's reply was taken from the rest of the listing (seed 3 at
// 8356de8: the answer to an !ao read as " (2d0pdnsepg7keuc2n5d05hsjw) |
// 7. https://soak.example/user1/3/87 …", the tail of the !pending-ao
// before it).
func awaitRestOfAnswer(u *irctest.User, line func(ircmsg.Message) bool) {
	end := time.Now().Add(replyWait)
	for time.Now().Before(end) {
		if _, err := u.WaitWithin(answerQuiet, "the rest of an answer", line); err != nil {
			return
		}
	}
}

// privateFromBot matches the bot's private lines to nick.
func privateFromBot(nick string) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		return (m.Command == "PRIVMSG" || m.Command == "NOTICE") && len(m.Params) > 1 && isBot(m.Nick()) && strings.EqualFold(m.Params[0], nick)
	}
}

// observe records every line the observer sees in the channel until its
// connection ends.
func (s *soak) observe(o *irctest.User, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		m, err := o.WaitWithin(time.Second, "line", func(m ircmsg.Message) bool {
			return (m.Command == "PRIVMSG" || m.Command == "NOTICE") && len(m.Params) > 1 && strings.EqualFold(m.Params[0], channel)
		})
		if err != nil {
			if o.Closed() {
				return
			}
			continue
		}
		s.rec.Add(history.Event{Kind: history.Line, Actor: m.Nick(), Channel: m.Params[0], Text: m.Params[1]})
		if t := m.Params[1]; isBot(m.Nick()) && (strings.Contains(t, " has finished. (") || strings.Contains(t, " was aborted. (") || strings.Contains(t, " of your jobs finished")) {
			select {
			case s.reportSeen <- struct{}{}:
			default:
			}
		}
	}
}

// ---------------------------------------------------------------------
// Dashboard viewers: gorilla/websocket clients on the leader's /stream,
// half on our protocol (?v=2), half on upstream's.

func (s *soak) runViewer(name string, v2 bool, stop <-chan struct{}) {
	via := "upstream"
	if v2 {
		via = "v2"
	}
	var mu sync.Mutex
	var frames, entries, dropped, gaps float64
	var lags []float64
	flush := func() {
		mu.Lock()
		slices.Sort(lags)
		num := map[string]float64{"frames": frames, "entries": entries, "dropped_reported": dropped}
		if v2 {
			num["gaps"] = gaps
		}
		if len(lags) > 0 {
			num["lag_p50_ms"] = lags[len(lags)/2]
			num["lag_p99_ms"] = lags[len(lags)*99/100]
		}
		frames, entries, dropped, gaps, lags = 0, 0, 0, 0, lags[:0]
		mu.Unlock()
		s.rec.Add(history.Event{Kind: history.Stream, Actor: name, Via: via, Num: num})
	}
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	var conn atomic.Pointer[websocket.Conn]
	go func() {
		for {
			select {
			case <-stop:
				if c := conn.Load(); c != nil {
					c.Close()
				}
				return
			case <-tick.C:
				flush()
			}
		}
	}()
	d := websocket.Dialer{HandshakeTimeout: 2 * time.Second, EnableCompression: true}
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := s.leaderNode()
		if n == nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		u := "ws://" + n.web + "/stream"
		if v2 {
			u += "?v=2"
		}
		c, _, err := d.Dial(u, nil)
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		conn.Store(c)
		// Per connection, each job's last score seen: a later entry
		// whose score skips some counts them as gaps (lost entries,
		// said or not).
		last := map[string]float64{}
		for {
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil {
				break
			}
			now := float64(time.Now().UnixMicro()) / 1000
			if v2 {
				var f struct {
					N       int     `json:"n"`
					T       float64 `json:"t"`
					Dropped float64 `json:"dropped"`
					Entries []struct {
						Ident string  `json:"ident"`
						Score float64 `json:"score"`
					} `json:"entries"`
				}
				if json.Unmarshal(msg, &f) != nil {
					continue
				}
				skipped := 0.0
				for _, e := range f.Entries {
					if l, ok := last[e.Ident]; ok && e.Score > l+1 {
						skipped += e.Score - l - 1
					}
					if l, ok := last[e.Ident]; !ok || e.Score > l {
						last[e.Ident] = e.Score
					}
				}
				mu.Lock()
				gaps += skipped
				frames++
				entries += float64(f.N)
				dropped += f.Dropped
				if f.N > 0 && f.T > 0 {
					lags = append(lags, now-f.T)
				}
				mu.Unlock()
				continue
			}
			var f struct {
				TS float64 `json:"ts"`
			}
			json.Unmarshal(msg, &f)
			mu.Lock()
			frames++
			entries++
			if f.TS > 1e9 {
				lags = append(lags, now-f.TS*1000)
			}
			mu.Unlock()
		}
		c.Close()
		time.Sleep(200 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------
// The feed's fake networks: each post becomes a Feed event.

func (s *soak) fakeFeeds(t *testing.T) feedURLs {
	var mu sync.Mutex
	seen := map[string]bool{}
	post := func(via, key, text string) {
		mu.Lock()
		dup := seen[via+key]
		seen[via+key] = true
		mu.Unlock()
		if dup {
			return
		}
		e := history.Event{Kind: history.Feed, Via: via, Text: text}
		// Mastodon's text has the URL; Bluesky's shows it without its
		// scheme (the link is in a facet).
		for _, w := range strings.Fields(text) {
			w = strings.TrimRight(w, ".,)")
			if !strings.HasPrefix(w, "http") && strings.HasPrefix(w, "soak.example/") {
				w = "https://" + w
			}
			if strings.HasPrefix(w, "http") {
				e.URL = w
				if _, id, err := ident.FromURL(w); err == nil {
					e.Ident = id
				}
				break
			}
		}
		s.rec.Add(e)
	}
	var n atomic.Int64
	masto := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/statuses" {
			http.NotFound(w, r)
			return
		}
		r.ParseForm()
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			key = fmt.Sprint(n.Add(1))
		}
		post("mastodon", key, r.PostForm.Get("status"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": key, "content": r.PostForm.Get("status")})
	}))
	t.Cleanup(masto.Close)
	var bmu sync.Mutex
	records := map[string]bool{}
	bsky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch strings.TrimPrefix(r.URL.Path, "/xrpc/") {
		case "com.atproto.server.createSession", "com.atproto.server.refreshSession":
			json.NewEncoder(w).Encode(map[string]string{"accessJwt": "a", "refreshJwt": "r", "did": "did:plc:soak", "handle": "soak.test"})
		case "com.atproto.repo.createRecord":
			var body struct {
				Rkey   string `json:"rkey"`
				Record struct {
					Text string `json:"text"`
				} `json:"record"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			bmu.Lock()
			records[body.Rkey] = true
			bmu.Unlock()
			post("bluesky", body.Rkey, body.Record.Text)
			json.NewEncoder(w).Encode(map[string]string{"uri": "at://did:plc:soak/app.bsky.feed.post/" + body.Rkey, "cid": "soak"})
		case "com.atproto.repo.getRecord":
			bmu.Lock()
			ok := records[r.URL.Query().Get("rkey")]
			bmu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": "RecordNotFound", "message": "no record"})
				return
			}
			json.NewEncoder(w).Encode(map[string]string{"uri": "at://x", "cid": "soak"})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(bsky.Close)
	return feedURLs{mastodon: masto.URL, bluesky: bsky.URL}
}
