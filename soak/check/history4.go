package check

// Invariant 4 for every job, ended ones included: each acknowledged
// change is in the job's history (archivebot:history:IDENT), which the
// script that makes a change appends in the same atomic step and which
// outlives the job (48 hours finished, 7 days aborted or failed), so a
// change whose write was skipped is seen even when the job has ended and
// its record is gone.

import (
	"encoding/json"
	"fmt"
	"sort"
)

// historyMax is how many entries a job's history keeps (store.HistoryMax):
// a full history may have lost its oldest entries.
const historyMax = 100

// signature is what an acknowledged change says, as its history entry
// says it.
func (ch change) signature() string {
	switch ch.kind {
	case sayIgnore:
		return "ignore_added\x00" + ch.pattern
	case sayUnignore:
		return "ignore_removed\x00" + ch.pattern
	case sayDelay:
		return fmt.Sprintf("delay\x00%d\x00%d", ch.lo, ch.hi)
	case sayConc:
		return fmt.Sprintf("concurrency\x00%d", ch.n)
	case sayAbort:
		return "abort"
	}
	return ""
}

// historySignatures are the changes a job's history holds, each as many
// times as it was written.
func historySignatures(entries []string) map[string]int {
	out := map[string]int{}
	for _, raw := range entries {
		var h struct {
			Event  string `json:"event"`
			Detail struct {
				Set       map[string]string `json:"set"`
				Patterns  []string          `json:"patterns"`
				Requested bool              `json:"requested"`
				Queued    bool              `json:"queued"`
			} `json:"detail"`
		}
		if json.Unmarshal([]byte(raw), &h) != nil {
			continue
		}
		switch h.Event {
		case "ignore_added", "ignore_removed":
			for _, p := range h.Detail.Patterns {
				out[h.Event+"\x00"+p]++
			}
		case "settings":
			set := h.Detail.Set
			if set["delay_min"] != "" && set["delay_max"] != "" {
				out["delay\x00"+set["delay_min"]+"\x00"+set["delay_max"]]++
			}
			if set["concurrency"] != "" {
				out["concurrency\x00"+set["concurrency"]]++
			}
		case "aborted":
			// The abort command's entries; a pipeline's end as aborted
			// (detail empty) is not the command's write.
			if h.Detail.Requested || h.Detail.Queued {
				out["abort"]++
			}
		}
	}
	return out
}

// judgeHistories holds every acknowledged change of every life of every
// job against the job's history in the final dump, and returns how many
// of each kind it judged.
func (c *checker) judgeHistories(dump Dump) map[sayKind]int {
	judged := map[sayKind]int{}
	idents := make([]string, 0, len(c.lives))
	for id := range c.lives {
		idents = append(idents, id)
	}
	sort.Strings(idents)
	full := 0
	for _, id := range idents {
		var chs []change
		for _, l := range c.lives[id] {
			chs = append(chs, l.changes...)
		}
		if len(chs) == 0 {
			continue
		}
		entries := dump.Members("archivebot:history:" + id)
		if len(entries) >= historyMax {
			full += len(chs)
			continue
		}
		have := historySignatures(entries)
		for _, ch := range chs {
			sig := ch.signature()
			if have[sig] > 0 {
				have[sig]--
				judged[ch.kind]++
				continue
			}
			where := fmt.Sprintf("archivebot:history:%s (%d entries)", id, len(entries))
			if _, ok := dump["archivebot:history:"+id]; !ok {
				where = "archivebot:history:" + id + " (not in Redis)"
			}
			c.inv[4].violate(Violation{Ident: id, T: ch.t, T2: c.res.End, Lines: []int{ch.line},
				Detail: fmt.Sprintf("history: %s change acknowledged (%s) is not in %s", changeKindName(ch.kind), describeChange(ch), where)})
		}
	}
	if full > 0 {
		c.inv[4].Notes = append(c.inv[4].Notes, fmt.Sprintf("%d changes of jobs whose history is full (%d entries, the oldest dropped): not held against it", full, historyMax))
	}
	return judged
}

func describeChange(ch change) string {
	switch ch.kind {
	case sayIgnore, sayUnignore:
		return ch.pattern
	case sayDelay:
		return fmt.Sprintf("[%d, %d] ms", ch.lo, ch.hi)
	case sayConc:
		return fmt.Sprintf("%d workers", ch.n)
	}
	return "abort"
}
