package check

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/archiveteam/archivebot-go/ident"
)

// What a bot line says, as far as the checker cares. The texts are the
// bot's own (bot/archive.go, bot/settings.go, coordinator/finish.go,
// coordinator/reaper.go, the operator's fail lines of
// cmd/archivebot/admin_actions.go and admin_pipelines.go, and
// bot/irc/combine.go's combined lines); a
// change of wording there must be made here too, or the checker sees no
// acknowledgements and fails invariant 1 loudly rather than passing.
type saying struct {
	kind  sayKind
	ident string
	url   string
	// pattern: ignore added or removed; lo, hi: delay; n: concurrency.
	pattern string
	lo, hi  int64
	n       int64
	// outcome of a report: finished, aborted or failed; reaped: the
	// reaper's failure (not !fail's).
	outcome string
	reaped  bool
	// queue: where a queued job waits (pending for !a, pending-ao for
	// !ao; "" when the line does not say); a pause's or resume's target
	// (a queue, or "all").
	queue string
}

type sayKind int

const (
	sayQueued     sayKind = iota + 1 // !a / !ao acknowledged
	sayExists                        // "Job for URL already exists."
	sayRefused                       // "Sorry, …"
	sayIgnore                        // ignore added
	sayUnignore                      // ignore removed
	sayDelay                         // delay set
	sayConc                          // concurrency set
	sayAbort                         // abort acknowledged (running or queued job)
	sayReport                        // an outcome report (finish line, fail line)
	sayUnknownYet                    // "Redis did not answer in time; I don't know yet …"
	sayPause                         // "Paused queue Q: …" / "Paused every queue: …"
	sayResume                        // "Resumed queue Q: …" / "Resumed every queue: …"
)

var (
	reNickPrefix = regexp.MustCompile(`^(?:\[for [^\]]*\] )?(?:([^\s:]+): )?`)
	reCombined   = regexp.MustCompile(`^\d+ commands done(?:, \d+ refused)?: `)
	reTimes      = regexp.MustCompile(` \(×\d+\)$`)
	reBraces     = regexp.MustCompile(`(?:^| )\{([^{}]*, [^{}]*)\}(?: |$)`)

	reQueuedAO  = regexp.MustCompile(`^Queued (?:URLs in )?(\S+) for archival without recursion\.$`)
	reQueued    = regexp.MustCompile(`^Queued (?:URLs in )?(\S+)\.$`)
	reUseStatus = regexp.MustCompile(`^Use !status ([0-9a-z]+) for updates`)
	reExists    = regexp.MustCompile(`^Job for (\S+) already exists\.$`)
	reIgnore    = regexp.MustCompile(`^Added ignore pattern (.+) to job ([0-9a-z]+)\.$`)
	reUnignore  = regexp.MustCompile(`^Removed ignore pattern (.+) from job ([0-9a-z]+)\.$`)
	reDelay     = regexp.MustCompile(`^Inter-request delay for job ([0-9a-z]+) set to \[(\d+), (\d+)\] ms\.$`)
	reConc      = regexp.MustCompile(`^Job ([0-9a-z]+) set to use (\d+) workers?\.$`)
	reAbortRun  = regexp.MustCompile(`^Initiated abort for (\S+)\.$`)
	reAbortQ    = regexp.MustCompile(`^Job ([0-9a-z]+) for (\S+) was aborted before it started\.$`)
	reFailCmd   = regexp.MustCompile(`^Job ([0-9a-z]+) for (\S+) failed: removed from its queue`)
	reFailOp    = regexp.MustCompile(`^Job ([0-9a-z]+) for (\S+) was failed by \S+ \(operator\): `)
	reReaped    = regexp.MustCompile(`^Job ([0-9a-z]+) <(\S+)> has had no heartbeat for .*; it has been marked as failed\.$`)
	reFinish    = regexp.MustCompile(`^Your job for (\S+) (has finished|was aborted)\. \(([0-9a-z]+)\)$`)
	reFinishN   = regexp.MustCompile(`^\d+ (?:of your )?jobs finished: (.*)$`)
	reFinishOne = regexp.MustCompile(`(\S+) \(([0-9a-z]+)(, aborted)?\)`)
	reUnknown   = regexp.MustCompile(`^Redis did not answer in time`)
	// bot/pause.go: the acknowledgements, and the refusal of a pause of
	// a queue already paused, which says the pause and "Nothing was
	// changed." without "Sorry".
	rePause     = regexp.MustCompile(`^Paused (?:queue (\S+)|(every queue)): no pipeline gets a job from it`)
	reResume    = regexp.MustCompile(`^Resumed (?:queue (\S+)|(every queue)): its jobs are handed out again`)
	rePauseHeld = regexp.MustCompile(`^(?:Queue \S+|Every queue) is paused by .* Nothing was changed\.$`)
	answered    = "Redis has answered about "
)

// nickOf is the nick a line is addressed to ("" when none) and the rest.
func nickOf(text string) (nick, rest string) {
	m := reNickPrefix.FindStringSubmatchIndex(text)
	if m == nil {
		return "", text
	}
	if m[2] >= 0 {
		nick = text[m[2]:m[3]]
	}
	return nick, text[m[1]:]
}

// pieces splits a line into the answers it carries: a combined reply's
// answers, with merged runs ("Added ignore pattern {a, b} to job X.")
// written out again.
func pieces(rest string) []string {
	if loc := reCombined.FindStringIndex(rest); loc != nil {
		rest = rest[loc[1]:]
	}
	var out []string
	for _, p := range strings.Split(rest, " | ") {
		p = reTimes.ReplaceAllString(p, "")
		// mergeRuns writes the one word that differs as a whole word
		// "{w1, w2, …}".
		if m := reBraces.FindStringSubmatchIndex(p); m != nil {
			for _, v := range strings.Split(p[m[2]:m[3]], ", ") {
				out = append(out, p[:m[2]-1]+v+p[m[3]+1:])
			}
			continue
		}
		out = append(out, p)
	}
	return out
}

// parseLine reads what a bot line says; a line may say several things
// (a combined reply or a combined finish report).
func parseLine(text string) []saying {
	_, rest := nickOf(text)
	var out []saying
	for _, p := range pieces(rest) {
		if strings.HasPrefix(p, answered) {
			// "Redis has answered about "CMD": ANSWER": the late answer
			// of a command whose write had no reply in time.
			q := p[len(answered):]
			for i := strings.Index(q, ": "); i >= 0; {
				if s, ok := parsePiece(q[i+2:]); ok {
					out = append(out, s...)
					break
				}
				j := strings.Index(q[i+2:], ": ")
				if j < 0 {
					break
				}
				i += 2 + j
			}
			continue
		}
		if s, ok := parsePiece(p); ok {
			out = append(out, s...)
		}
	}
	return out
}

func identOf(url string) string { return ident.Of(url) }

// pauseTarget is a pause's target as the checker keys it: the queue, or
// "all" for "every queue".
func pauseTarget(queue, every string) string {
	if every != "" {
		return "all"
	}
	return queue
}

func parsePiece(p string) ([]saying, bool) {
	if m := reQueuedAO.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayQueued, url: m[1], ident: identOf(m[1]), queue: "pending-ao"}}, true
	}
	if m := reQueued.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayQueued, url: m[1], ident: identOf(m[1]), queue: "pending"}}, true
	}
	if m := rePause.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayPause, queue: pauseTarget(m[1], m[2])}}, true
	}
	if m := reResume.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayResume, queue: pauseTarget(m[1], m[2])}}, true
	}
	if rePauseHeld.MatchString(p) {
		return []saying{{kind: sayRefused}}, true
	}
	if m := reUseStatus.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayQueued, ident: m[1]}}, true
	}
	if m := reExists.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayExists, url: m[1], ident: identOf(m[1])}}, true
	}
	if m := reIgnore.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayIgnore, pattern: m[1], ident: m[2]}}, true
	}
	if m := reUnignore.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayUnignore, pattern: m[1], ident: m[2]}}, true
	}
	if m := reDelay.FindStringSubmatch(p); m != nil {
		lo, _ := strconv.ParseInt(m[2], 10, 64)
		hi, _ := strconv.ParseInt(m[3], 10, 64)
		return []saying{{kind: sayDelay, ident: m[1], lo: lo, hi: hi}}, true
	}
	if m := reConc.FindStringSubmatch(p); m != nil {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		return []saying{{kind: sayConc, ident: m[1], n: n}}, true
	}
	if m := reAbortRun.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayAbort, url: m[1], ident: identOf(m[1])}}, true
	}
	if m := reAbortQ.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayAbort, ident: m[1], url: m[2]}}, true
	}
	if m := reFailCmd.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayReport, ident: m[1], url: m[2], outcome: "failed"}}, true
	}
	if m := reFailOp.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayReport, ident: m[1], url: m[2], outcome: "failed"}}, true
	}
	if m := reReaped.FindStringSubmatch(p); m != nil {
		return []saying{{kind: sayReport, ident: m[1], url: m[2], outcome: "failed", reaped: true}}, true
	}
	if m := reFinish.FindStringSubmatch(p); m != nil {
		o := "finished"
		if m[2] == "was aborted" {
			o = "aborted"
		}
		return []saying{{kind: sayReport, ident: m[3], url: m[1], outcome: o}}, true
	}
	if m := reFinishN.FindStringSubmatch(p); m != nil {
		var out []saying
		for _, e := range reFinishOne.FindAllStringSubmatch(m[1], -1) {
			o := "finished"
			if e[3] != "" {
				o = "aborted"
			}
			out = append(out, saying{kind: sayReport, ident: e[2], url: e[1], outcome: o})
		}
		return out, len(out) > 0
	}
	if reUnknown.MatchString(p) {
		return []saying{{kind: sayUnknownYet}}, true
	}
	if strings.HasPrefix(p, "Sorry") {
		return []saying{{kind: sayRefused}}, true
	}
	return nil, false
}

// command is what a scripted user's line asked for.
type command struct {
	name  string // "a", "ao", "abort", "ig", … without the "!"
	url   string // normalized, for !a / !ao
	ident string // the job it is about, when it names one
}

var aliases = map[string]string{
	"archive": "a", "archiveonly": "ao", "ignore": "ig", "unignore": "unig", "ug": "unig",
	"d": "delay", "concurrency": "con", "concurrent": "con",
}

// parseCommand reads a command line ("!a URL --opts", "!abort IDENT").
func parseCommand(text string) command {
	f := strings.Fields(text)
	if len(f) == 0 || !strings.HasPrefix(f[0], "!") {
		return command{}
	}
	c := command{name: strings.TrimPrefix(f[0], "!")}
	if a, ok := aliases[c.name]; ok {
		c.name = a
	}
	args := f[1:]
	if len(args) > 0 && args[0] == "<" {
		args = args[1:]
	}
	if len(args) == 0 {
		return c
	}
	switch c.name {
	case "a", "ao":
		if n, id, err := ident.FromURL(args[0]); err == nil {
			c.url, c.ident = n, id
		}
	default:
		c.ident = args[0]
	}
	return c
}
