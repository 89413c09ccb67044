package check

// Registrations past the lease fence (part of invariant 5): a node that
// lost the leader lease writes nothing (doc/architecture.md, High
// availability: every write script is fenced, user commands included).
// A frozen leader that wakes still holds the IRC lines it received while
// frozen; its fenced register refuses them. The history shows a
// registration that got past the fence: the job's "queued" entry in
// Redis (archivebot:history:IDENT) was stamped after a change of leader
// that came after the !a was sent. The new leader never saw that !a (it
// joins IRC after it takes the lease, and IRC does not replay), and the
// old one no longer held the lease: one command, and a job no leader
// registered. The runner makes every freeze of the leader hold such a
// command (soak/hold_test.go).

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

const (
	// leaderSeenLag bounds how late the runner records a change of
	// leader (it asks both nodes' /readyz every 250 ms, 1 s timeout
	// each): a command sent this long before the Leader event was sent
	// before the new leader took the lease.
	leaderSeenLag = 3 * time.Second
	// stampSlack: the node stamps the entry on its own clock (the
	// machine's, milliseconds) when it registers.
	stampSlack = time.Second
	// skewReach: a clock-skew fault moves a node's stamps by 30 s;
	// registrations stamped within this of a skew window are not judged.
	skewReach = 35 * time.Second
)

// judgeFence holds every registration in the final dump's job histories
// against the changes of leader.
func (c *checker) judgeFence(dump Dump) {
	inv := c.inv[5]
	var changes []ev
	for i, l := range c.leaders {
		if i > 0 && l.Actor != "" && l.Actor != c.leaders[i-1].Actor {
			changes = append(changes, l)
		}
	}
	var skews []Window
	for _, w := range c.res.Faults {
		if w.Fault == "clock-skew" {
			skews = append(skews, w)
		}
	}
	holderAt := func(t time.Time) string {
		h := ""
		for _, l := range c.leaders {
			if l.T.After(t) {
				break
			}
			if l.Actor != "" {
				h = l.Actor
			}
		}
		return h
	}
	var keys []string
	for k, e := range dump {
		if e.Type == "list" && strings.HasPrefix(k, "archivebot:history:") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	checked, skewed := 0, 0
	registered := map[string]bool{}
	for _, k := range keys {
		id := strings.TrimPrefix(k, "archivebot:history:")
		for _, raw := range dump.Members(k) {
			var h struct {
				TS    float64 `json:"ts"`
				Event string  `json:"event"`
			}
			if json.Unmarshal([]byte(raw), &h) != nil || h.Event != "queued" || h.TS <= 0 {
				continue
			}
			registered[id] = true
			reg := time.Unix(0, int64(h.TS*1e9))
			if nearSkew(skews, reg) {
				skewed++
				continue
			}
			sent, ok := c.lastSend(id, time.Time{}, reg.Add(stampSlack))
			if !ok {
				continue // no scripted user's !a: not ours to judge
			}
			checked++
			was := holderAt(sent)
			for _, ch := range changes {
				if ch.Actor == was || !sent.Before(ch.T.Add(-leaderSeenLag)) || !reg.After(ch.T.Add(stampSlack)) {
					continue
				}
				back := false // the node that had the command led again since
				for _, l := range c.leaders {
					if l.T.After(ch.T) && !l.T.After(reg.Add(stampSlack)) && l.Actor == was {
						back = true
					}
				}
				if back {
					continue
				}
				inv.violate(Violation{Ident: id, T: sent, T2: reg, Lines: []int{ch.line},
					Detail: fmt.Sprintf("registered past the lease fence: its !a was sent at the first time, when %s led; %s took the lease at %s (history line %d); the job's queued entry in Redis is stamped at the second time, by a node that no longer led",
						firstNonEmpty(was, "no node"), ch.Actor, ch.T.UTC().Format("15:04:05.000"), ch.line)})
				break
			}
		}
	}
	c.fenceChecked, c.nearSkew = checked, skewed
	inv.count("registrations held against the lease", "%d (%d changes of leader; %d stamped near a clock skew, not judged)", checked, len(changes), skewed)
	// The commands a frozen leader held (the runner types one at each
	// freeze of the leader, soak/hold_test.go): each registered one is
	// judged above like any other.
	if len(c.heldSends) > 0 {
		reg := 0
		for _, e := range c.heldSends {
			if id := parseCommand(e.Text).ident; id != "" && registered[id] {
				reg++
			}
		}
		inv.count("commands held by a frozen leader", "%d (%d of them registered)", len(c.heldSends), reg)
	}
}

func nearSkew(ws []Window, t time.Time) bool {
	for _, w := range ws {
		if !t.Before(w.Start.Add(-skewReach)) && !t.After(w.End.Add(skewReach)) {
			return true
		}
	}
	return false
}
