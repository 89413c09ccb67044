package check

// Every answer a user or a probe gets is classified: an answer the
// checker cannot read is an "other" (skips.go), named and bounded, not
// passed over. The shapes are the bot's own replies (bot/*.go: the
// c.Reply, c.Refuse and c.Out.Private lines of the commands the soak's
// users send), and the !status IDENT answer (bot/status.go) is read
// for its state.

import (
	"regexp"
	"strings"
)

// answerShapes are the answers the checker recognises besides what
// parsePiece reads (acknowledgements, refusals starting "Sorry", reports,
// pauses): what the commands of the soak's mix print, by name.
var answerShapes = []struct {
	name string
	re   *regexp.Regexp
}{
	{"status summary", regexp.MustCompile(`^Job status: \d+ completed, \d+ aborted, \d+ failed, \d+ in progress, \d+ pending, \d+ pending-ao, `)},
	{"job status", reJobStatus},
	{"pause line", regexp.MustCompile(`^(?:Queue \S+|Every queue) is paused by \S+ since `)},
	{"direct pipelines", regexp.MustCompile(`^\d+ pipelines? takes? directly from Redis: limits not enforced for (?:it|them)\.$`)},
	{"pending", regexp.MustCompile(`^(?:No jobs are pending\.|1 pending job:|\d+ pending jobs:|\d+ pending jobs in \d+ queues, next to run first:|\d+\. \S+ \([0-9a-z]+\)|\S+ \(\d+(?:, paused)?\):|\.\.\. and \d+ more in \S+\.|Every queue, live: \S+)$`)},
	{"failed by command", regexp.MustCompile(`^OK, job [0-9a-z]+ for \S+ is failed; its report goes to `)},
	{"moved", regexp.MustCompile(`^Moved job [0-9a-z]+ (?:to the (?:front|back) of \S+: it runs (?:next|last)\.|from \S+ to the back of \S+\.)$`)},
	{"refused: job state", regexp.MustCompile(`^Job [0-9a-z]+ (?:has already finished; |is already in \S+\.$|is still queued: |does not yet have an expiry timer\.$)`)},
	{"usage", regexp.MustCompile(`^Usage: `)},
	{"warning", regexp.MustCompile(`^Warning: `)},
	{"ignore sets", regexp.MustCompile(`^Added \d+ patterns from ignore sets? `)},
	{"redis late", regexp.MustCompile(`^Redis (?:has answered, but something went wrong|has still not answered after|did not answer in time)`)},
	{"notice", reNotice},
}

// reJobStatus is the one-line status of a job (bot/status.go: jobStatus
// and failureStatus): "Job IDENT <URL>. Started by NICK. STATE…".
var reJobStatus = regexp.MustCompile(`^Job ([0-9a-z]+) <(\S+?)>\. (?:Started by \S+?\. )?(.*)$`)

// classifyPiece names what one answer (a piece of a line) is, "" when the
// checker cannot read it.
func classifyPiece(p string) string {
	if strings.HasPrefix(p, answered) {
		return "late answer"
	}
	if s, ok := parsePiece(p); ok && len(s) > 0 {
		return "said"
	}
	for _, sh := range answerShapes {
		if sh.re.MatchString(p) {
			return sh.name
		}
	}
	return ""
}

// unreadAnswer is the first piece of a bot line addressed to a user that
// the checker cannot read ("" when it reads every piece).
func unreadAnswer(text string) string {
	_, rest := nickOf(text)
	first := ""
	// A private answer has no "nick: " before it, and some answers
	// start with a word and a colon ("Usage: …"): read the line both
	// ways.
	for _, t := range []string{rest, text} {
		bad := ""
		for _, p := range pieces(t) {
			if classifyPiece(p) == "" {
				bad = p
				break
			}
		}
		if bad == "" {
			return ""
		}
		if first == "" {
			first = bad
		}
	}
	return first
}

// StatusState reads the state a !status IDENT answer states: queued
// (upstream's plain "In queue." and ours with the queue, its place and
// what holds it), running, finished, aborted, failed; absent when the bot
// knows no such job; error when Redis did not answer (not judged); other
// when the answer has none of the node's shapes (counted and bounded,
// skips.go). The runner records this as the probe's Outcome; the checker
// reads the text again with it.
func StatusState(text string) string {
	_, text = nickOf(strings.TrimSpace(text))
	if m := reJobStatus.FindStringSubmatch(text); m != nil {
		rest := m[3]
		switch {
		case strings.HasPrefix(rest, "In queue"):
			return "queued"
		case strings.HasPrefix(rest, "In progress."):
			return "running"
		case strings.HasPrefix(rest, "Completed."):
			return "finished"
		case strings.HasPrefix(rest, "Aborted."):
			return "aborted"
		case strings.HasPrefix(rest, "Failed"):
			return "failed"
		}
		return "other"
	}
	switch {
	case strings.HasPrefix(text, "Sorry, I don't know anything about "),
		strings.HasPrefix(text, "Sorry, that URL has not been archived recently"):
		return "absent"
	case strings.HasPrefix(text, "Redis did not answer in time"),
		strings.HasPrefix(text, "Redis has still not answered"),
		strings.HasPrefix(text, "Sorry, backend unavailable"),
		strings.HasPrefix(text, "Sorry, something went wrong"):
		return "error"
	}
	return "other"
}
