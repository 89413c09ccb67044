package web

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// statusBody is /status, upstream's shape plus pending-large (which
// upstream forgot): it counts in pending-others and its details.
type statusBody struct {
	Pending              int64            `json:"pending"`
	PendingAO            int64            `json:"pending-ao"`
	PendingOthers        int64            `json:"pending-others"`
	PendingOthersDetails map[string]int64 `json:"pending-others-details"`
	Working              int64            `json:"working"`
	Completed            int64            `json:"completed"`
	// Paused is ours: the paused queues (or "all"), with who paused each,
	// when (UNIX seconds) and why (doc/protocol.md, Paused queues).
	Paused  map[string]store.Pause `json:"paused,omitempty"`
	Aborted int64                  `json:"aborted"`
	Failed  int64                  `json:"failed"`
}

// handleStatus is GET /status: queue lengths and outcome counters.
// Redis: the SCAN for pending:* (one call per 1,000 keys), then one
// pipeline (7 + number of named queues commands).
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if accepts(w, r, typeJSON, typeHTML) == "" {
		return
	}
	c, err := s.store.StatusCounts(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	b := statusBody{Pending: c.Pending, PendingAO: c.PendingAO, Working: c.Working,
		Completed: c.Completed, Aborted: c.Aborted, Failed: c.Failed,
		PendingOthersDetails: map[string]int64{}}
	for _, p := range c.Pauses {
		if b.Paused == nil {
			b.Paused = map[string]store.Pause{}
		}
		b.Paused[p.Queue] = p
	}
	for q, n := range c.Named {
		b.PendingOthersDetails[q] = n
		b.PendingOthers += n
	}
	if c.PendingLarge > 0 {
		b.PendingOthersDetails["pending-large"] = c.PendingLarge
		b.PendingOthers += c.PendingLarge
	}
	writeJSON(w, http.StatusOK, b)
}

// handlePending is GET /pending (text/plain): every non-empty queue by
// name, then "  N. URL (IDENT)" for each of its jobs, next to run first,
// a blank line between queues — upstream's text exactly (no final
// newline).
// Redis: the SCAN for pending:*, one pipeline of LRANGEs, one pipeline of
// HGET url (one per queued job).
func (s *Server) handlePending(w http.ResponseWriter, r *http.Request) {
	if s.page(w, r, "page.html", typeText) {
		return
	}
	if accepts(w, r, typeText) == "" {
		return
	}
	qs, err := s.store.PendingQueues(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	var b strings.Builder
	for i, q := range qs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(q.Name)
		for n, j := range q.Jobs {
			fmt.Fprintf(&b, "\n  %d. %s (%s)", n+1, j.URL, j.Ident)
		}
	}
	writeText(w, http.StatusOK, b.String())
}

// pipelineFields are the pipeline record fields /pipelines shows.
var pipelineFields = []string{"id", "hostname", "nickname", "fqdn", "pid", "version", "mem_usage",
	"mem_available", "disk_usage", "disk_available", "load_average_1m", "load_average_5m",
	"load_average_15m", "ts", "python", "status"}

// handlePipelines is GET /pipelines: {"pipelines":[record, …]}, each
// record's fields as strings as the pipeline wrote them (fields it did not
// write are absent), sorted by id.
// Redis: SMEMBERS pipelines, one pipeline of HGETALL.
func (s *Server) handlePipelines(w http.ResponseWriter, r *http.Request) {
	if s.pageOrNotJSON(w, r) {
		return
	}
	ps, err := s.store.Pipelines(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := make([]map[string]string, 0, len(ps))
	for _, p := range ps {
		m := make(map[string]string, len(pipelineFields))
		for _, f := range pipelineFields {
			if v, ok := p.Fields[f]; ok {
				m[f] = v
			}
		}
		if _, ok := m["id"]; !ok {
			m["id"] = p.Key
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"pipelines": out})
}

// maxRecent is the most entries per job /logs/recent returns (upstream's
// clamp).
const maxRecent = 10

// handleRecent is GET /logs/recent?count=N: for each running job its last
// N log entries (1 ≤ N; above 10 counts as 10; default 10), each entry's
// own fields merged with "job_data". Entries that are not JSON objects are
// skipped. A count that is not a positive integer is a 400 (upstream's
// to_i turned junk into 0 and sent whole logs).
// Redis: LRANGE working, then one pipeline of HGETALL + ZRANGE per job.
func (s *Server) handleRecent(w http.ResponseWriter, r *http.Request) {
	// A browser gets a page showing the same entries, as upstream's
	// does.
	if s.pageOrNotJSON(w, r) {
		return
	}
	count := maxRecent
	if q := r.URL.Query(); q.Has("count") {
		n, err := strconv.Atoi(q.Get("count"))
		if err != nil && len(q.Get("count")) > 0 && strings.Trim(q.Get("count"), "0123456789") == "" {
			n, err = math.MaxInt, nil // all digits but too large: clamp like any large count
		}
		if err != nil || n < 1 {
			jsonError(w, http.StatusBadRequest, "count must be a positive integer (at most 10 entries per job are sent)")
			return
		}
		count = min(n, maxRecent)
	}
	logs, err := s.store.RecentLogs(r.Context(), count)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	jds := make([][]byte, len(logs))
	size := 3
	for i, jl := range logs {
		if b, err := marshal(jobData(jl.Job)); err == nil {
			jds[i] = bytes.TrimSuffix(b, []byte("\n"))
		}
		if len(jl.Entries) == 0 && s.opt.RecentAPI != nil {
			jl.Entries = s.opt.RecentAPI(jl.Job.Ident, count)
			logs[i] = jl
		}
		for _, e := range jl.Entries {
			size += recentEntrySize(e, jds[i])
		}
	}
	if max := s.opt.RecentMaxBytes; max > 0 && size > max {
		size = s.capRecent(w, logs, jds, count, max)
	}
	var buf bytes.Buffer
	buf.Grow(size)
	buf.WriteByte('[')
	first := true
	for i, jl := range logs {
		jd := jds[i]
		if jd == nil {
			continue
		}
		for _, e := range jl.Entries {
			// Only the entry types upstream's dashboard.js renders: it
			// throws on any other, and the page then drops the rest of
			// this response. Oversized entries were not read.
			if e.Kind != record.EntryObject || !upstreamType(e.Type) {
				continue
			}
			entry := []byte(e.Doc)
			if !first {
				buf.WriteByte(',')
			}
			first = false
			entry = withScore(entry, e.Score)
			appendWithJobData(&buf, entry, jd)
		}
	}
	buf.WriteString("]\n")
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// recentEntrySize is about what entry e takes in a /logs/recent answer
// (its document, job_data, the score and the separators).
func recentEntrySize(e record.LogEntry, jd []byte) int { return len(e.Doc) + len(jd) + 40 }

// capRecent keeps the answer within max bytes: every job's newest entry
// first, then every job's second newest, and so on, so that each job keeps
// its latest entries and only older ones are left out. The answer says how
// many in X-ArchiveBot-Omitted-Entries, and they are counted. It returns
// the size of what is kept.
func (s *Server) capRecent(w http.ResponseWriter, logs []store.JobLog, jds [][]byte, count, max int) int {
	keep := make([]int, len(logs))
	used := 3
	for round := 1; round <= count; round++ {
		more := false
		for i, jl := range logs {
			if jds[i] == nil || len(jl.Entries) < round || keep[i] != round-1 {
				continue
			}
			n := recentEntrySize(jl.Entries[len(jl.Entries)-round], jds[i])
			if used+n > max {
				continue
			}
			used += n
			keep[i] = round
			more = true
		}
		if !more {
			break
		}
	}
	omitted := 0
	for i := range logs {
		es := logs[i].Entries
		omitted += len(es) - keep[i]
		logs[i].Entries = es[len(es)-keep[i]:]
	}
	if omitted > 0 {
		w.Header().Set("X-ArchiveBot-Omitted-Entries", strconv.Itoa(omitted))
		metrics.RecentOmitted(omitted)
	}
	return used
}

// withScore returns entry, a JSON object, with "score": the entry's score
// in the job's log, added last so that it wins over a "score" a pipeline
// wrote (JSON.parse keeps the last). The dashboard and the job page load
// /logs/recent after subscribing to the stream and show each score once.
// Upstream's dashboard.js reads only the fields it knows.
func withScore(entry []byte, score float64) []byte {
	if math.IsInf(score, 0) || math.IsNaN(score) {
		return entry // not a JSON number
	}
	out := make([]byte, 0, len(entry)+32)
	out = append(out, entry[:len(entry)-1]...)
	if len(bytes.TrimSpace(entry[1:len(entry)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"score":`...)
	out = strconv.AppendFloat(out, score, 'f', -1, 64)
	return append(out, '}')
}

// appendWithJobData writes entry, a valid JSON object, with "job_data":
// jd added. Entries are spliced, not decoded and re-encoded: /logs/recent
// sends up to 10 per running job, and decoding each into a map cost most
// of the request. An entry that already has a job_data key (pipelines
// write none) goes the slow way and has it replaced.
func appendWithJobData(buf *bytes.Buffer, entry, jd []byte) {
	if bytes.Contains(entry, []byte(`"job_data"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(entry, &m) == nil {
			m["job_data"] = jd
			if b, err := marshal(m); err == nil {
				buf.Write(bytes.TrimSuffix(b, []byte("\n")))
				return
			}
		}
	}
	buf.WriteByte('{')
	if body := bytes.TrimSpace(entry[1 : len(entry)-1]); len(body) > 0 {
		buf.Write(body)
		buf.WriteByte(',')
	}
	buf.WriteString(`"job_data":`)
	buf.Write(jd)
	buf.WriteByte('}')
}

// handleFinished is GET /finished: job_data of every job that finished,
// was aborted or failed and whose record (or, for failed jobs, failure
// record) still exists, oldest first. Failed jobs carry "failed": true,
// "failed_reason" and "failed_by"; every entry carries "failed".
// Redis: ZRANGE archivebot:finished (our index, never a keyspace scan),
// one pipeline of 2 HGETALL per indexed job, and one ZREM when some
// entries have expired.
func (s *Server) handleFinished(w http.ResponseWriter, r *http.Request) {
	if s.pageOrNotJSON(w, r) {
		return
	}
	jobs, err := s.store.FinishedJobs(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := make([]JobData, 0, len(jobs))
	for _, fj := range jobs {
		out = append(out, finishedData(fj))
	}
	writeJSON(w, http.StatusOK, out)
}

// identRE is what an ident looks like (base-36 of a UUID: at most 25
// characters; a little slack for idents made elsewhere).
var identRE = regexp.MustCompile(`^[0-9a-z]{1,32}$`)

// maxIgnoreIdents bounds one /ignores request.
const maxIgnoreIdents = 50

// handleIgnores is GET /ignores/IDENT[,IDENT…] (text/plain):
// "IDENT<TAB>PATTERN" lines sorted by pattern, then ident. With
// ?compact=true (one ident only), the patterns grouped by the ignore set
// they came from, then "Manual ignores for job IDENT:" — upstream's text.
// Unknown idents (no job record, ignore set or failure record) are a 404
// naming them.
// Redis: one pipeline (SMEMBERS + EXISTS per ident).
func (s *Server) handleIgnores(w http.ResponseWriter, r *http.Request) {
	if accepts(w, r, typeText) == "" {
		return
	}
	idents := strings.Split(r.PathValue("idents"), ",")
	if len(idents) > maxIgnoreIdents {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("at most %d idents per request\n", maxIgnoreIdents))
		return
	}
	for _, id := range idents {
		if !identRE.MatchString(id) {
			writeText(w, http.StatusBadRequest, fmt.Sprintf("%q is not a job ident (lowercase letters and digits)\n", clip(id, 40)))
			return
		}
	}
	compact := r.URL.Query().Get("compact") == "true"
	if compact && len(idents) > 1 {
		writeText(w, http.StatusBadRequest, "compact=true takes exactly one ident\n")
		return
	}
	pats, known, err := s.store.IgnoreSets(r.Context(), idents)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	var unknown []string
	for _, id := range idents {
		if !known[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		writeText(w, http.StatusNotFound, "unknown job: "+strings.Join(unknown, ", ")+"\n")
		return
	}
	if compact {
		var sets map[string][]string
		if s.opt.IgnoreSets != nil {
			sets = s.opt.IgnoreSets()
		}
		writeText(w, http.StatusOK, compactIgnores(idents[0], pats[idents[0]], sets))
		return
	}
	type line struct{ ident, pattern string }
	var lines []line
	for _, id := range idents {
		for _, p := range pats[id] {
			lines = append(lines, line{id, p})
		}
	}
	slices.SortFunc(lines, func(a, b line) int {
		if c := strings.Compare(a.pattern, b.pattern); c != 0 {
			return c
		}
		return strings.Compare(a.ident, b.ident)
	})
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.ident + "\t" + l.pattern)
	}
	writeText(w, http.StatusOK, b.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// compactIgnores groups a job's patterns by the ignore set they came from,
// as upstream's compact view: the global set is checked first; a pattern
// also in the global set does not make another set match; a set is shown
// "excluding:" the patterns of it the job lacks; what no set explains is
// listed as manual ignores.
func compactIgnores(ident string, patterns []string, sets map[string][]string) string {
	names := make([]string, 0, len(sets))
	for n := range sets {
		if n != "global" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if _, ok := sets["global"]; ok {
		names = append([]string{"global"}, names...)
	}
	left := make(map[string]map[string]bool, len(sets)) // set → patterns the job lacks so far
	for n, ps := range sets {
		left[n] = make(map[string]bool, len(ps))
		for _, p := range ps {
			left[n][p] = true
		}
	}
	inGlobal := map[string]bool{}
	for _, p := range sets["global"] {
		inGlobal[p] = true
	}
	used := map[string]bool{}
	manual := map[string]bool{}
	for _, p := range patterns {
		manual[p] = true
	}
	for _, p := range patterns {
		for _, n := range names {
			if !left[n][p] {
				continue
			}
			delete(left[n], p)
			if n != "global" && inGlobal[p] {
				continue
			}
			used[n] = true
			delete(manual, p)
		}
	}
	out := []string{"Ignore sets for job " + ident + ":"}
	for _, n := range names {
		if !used[n] {
			continue
		}
		if len(left[n]) == 0 {
			out = append(out, "  "+n)
			continue
		}
		out = append(out, "  "+n+", excluding:")
		for _, p := range sortedKeys(left[n]) {
			out = append(out, "    "+p)
		}
	}
	if len(manual) > 0 {
		out = append(out, "", "Manual ignores for job "+ident+":")
		for _, p := range sortedKeys(manual) {
			out = append(out, "  "+p)
		}
	}
	return strings.Join(out, "\n")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// feedSize is how many tweets the feed shows.
const feedSize = 100

// feedItem is one tweet as the feed shows it.
type feedItem struct {
	at   time.Time
	text string
	id   string // sha1 hex of "SCORE-TEXT", SCORE as Ruby writes a float
}

// feedHandler serves GET /feed (Atom, RSS or JSON by Accept; Atom for
// */*), /feed/archivebot.rss and /feed/archivebot.atom: the newest 100
// entries of tweets:done, newest first.
// Redis: one ZRANGE tweets:done -100 -1 WITHSCORES.
func (s *Server) feedHandler(offers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		typ := accepts(w, r, offers...)
		if typ == "" {
			return
		}
		tweets, err := s.store.RecentTweets(r.Context(), feedSize)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		items := make([]feedItem, len(tweets))
		for i, t := range tweets {
			sum := sha1.Sum([]byte(rubyFloat(t.Score) + "-" + t.Text))
			sec, frac := math.Modf(t.Score)
			items[i] = feedItem{at: time.Unix(int64(sec), int64(frac*1e9)).UTC(), text: t.Text, id: hex.EncodeToString(sum[:])}
		}
		switch typ {
		case typeJSON:
			out := make([][3]string, len(items))
			for i, it := range items {
				out[i] = [3]string{it.at.Format(iso8601), it.text, it.id}
			}
			writeJSON(w, http.StatusOK, out)
		case typeRSS:
			writeXML(w, typeRSS, rssFeed(items))
		default:
			writeXML(w, typeAtom, atomFeed(items, s.now()))
		}
	}
}

// iso8601 is Ruby's Time#iso8601 of a local time in UTC ("+00:00").
const iso8601 = "2006-01-02T15:04:05-07:00"

// rubyFloat writes f as Ruby's Float#to_s: the shortest representation,
// always with a fraction ("1732900000.0"), exponent form at 1e16 and above
// or below 1e-4 ("1.0e+16").
func rubyFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch {
		case math.IsNaN(f):
			return "NaN"
		case f > 0:
			return "Infinity"
		}
		return "-Infinity"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs >= 1e16 || abs < 1e-4) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		return mant + "e" + exp
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

const (
	feedTitle = "ArchiveBot"
	feedText  = "I am not AI. My codename is Project 2501. I am an angry, cynical entity that was created in a sea of information."
	feedLink  = "http://archiveteam.org/index.php?title=ArchiveBot"
	feedLogo  = "https://pbs.twimg.com/profile_images/425135819632828416/A5g6UE4x.jpeg"
	feedID    = "urn:uuid:5fe899f5-acb6-4381-9142-339b60abbace"
)

type atomLink struct {
	Href string `xml:"href,attr"`
}

type atomEntry struct {
	Title   string `xml:"title"`
	Content string `xml:"content"`
	Updated string `xml:"updated"`
	ID      string `xml:"id"`
}

type atomDoc struct {
	XMLName  xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	Title    string      `xml:"title"`
	Subtitle string      `xml:"subtitle"`
	Link     atomLink    `xml:"link"`
	Logo     string      `xml:"logo"`
	Author   string      `xml:"author>name"`
	ID       string      `xml:"id"`
	Updated  string      `xml:"updated"`
	Entries  []atomEntry `xml:"entry"`
}

func atomFeed(items []feedItem, now time.Time) atomDoc {
	d := atomDoc{Title: feedTitle, Subtitle: feedText, Link: atomLink{feedLink}, Logo: feedLogo,
		Author: feedTitle, ID: feedID, Updated: now.UTC().Format(iso8601)}
	for _, it := range items {
		d.Entries = append(d.Entries, atomEntry{Title: it.text, Content: it.text,
			Updated: it.at.Format(iso8601), ID: "urn:X-SHA1:" + it.id})
	}
	return d
}

type rssItem struct {
	Title   string `xml:"title"`
	PubDate string `xml:"pubDate"`
	GUID    string `xml:"guid"`
}

type rssDoc struct {
	XMLName xml.Name `xml:"rss"`
	Version string   `xml:"version,attr"`
	Channel struct {
		Title       string `xml:"title"`
		Description string `xml:"description"`
		Link        string `xml:"link"`
		Image       struct {
			URL   string `xml:"url"`
			Title string `xml:"title"`
			Link  string `xml:"link"`
		} `xml:"image"`
		Items []rssItem `xml:"item"`
	} `xml:"channel"`
}

func rssFeed(items []feedItem) rssDoc {
	var d rssDoc
	d.Version = "2.0"
	d.Channel.Title, d.Channel.Description, d.Channel.Link = feedTitle, feedText, feedLink
	d.Channel.Image.URL, d.Channel.Image.Title, d.Channel.Image.Link = feedLogo, feedText, feedLink
	for _, it := range items {
		d.Channel.Items = append(d.Channel.Items, rssItem{Title: it.text,
			PubDate: it.at.Format(time.RFC1123Z), GUID: "urn:X-SHA1:" + it.id})
	}
	return d
}

// writeXML sends a feed. Unlike upstream's templates, the text is escaped,
// so a URL with & or < cannot break the document.
func writeXML(w http.ResponseWriter, typ string, doc any) {
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "encoding the feed failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", typ+"; charset=utf-8")
	h.Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(xml.Header))
	w.Write(b)
	w.Write([]byte("\n"))
}
