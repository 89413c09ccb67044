package check

// Invariants 2 and 3: one holder per job, no take after the end, and
// nothing for a revoked key.

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// ---- invariants 2 and 3

func (c *checker) judge2and3(dump Dump) {
	takes := 0
	for _, ls := range c.lives {
		for _, l := range ls {
			for _, t := range l.trans {
				if t.state == "running" {
					takes++
				}
			}
		}
	}
	c.inv[2].count("takes", "%d", takes)
	c.evidence[2] = takes
	held := 0
	for _, hs := range c.holds {
		held += len(hs)
	}
	c.inv[2].count("held at the end", "%d", held)
	c.judgeGhostTakes(dump)
	c.judgePaused()
	c.inv[2].count("released by a pipeline's death", "%d", c.releasedByDeath)
	c.inv[2].count("takes answered again under their take_id", "%d", c.takesAnsweredAgain)
	c.inv[2].count("new lives taken while a direct pipeline still crawled the failed one", "%d", c.directFailedStillHeld)
	if c.bridgeTakes > 0 {
		c.inv[2].count("relayed takes", "%d (%d passed on, %d orphans, %d of them found ended)",
			c.bridgeTakes, c.handoffs, c.bridgeTakes-c.handoffs, c.orphansEnded)
	}
	if c.endsWithoutTake > 0 || c.unknownTakes > 0 {
		c.inv[2].Notes = append(c.inv[2].Notes, fmt.Sprintf("%d ends without a recorded take; %d takes of jobs no scripted user queued", c.endsWithoutTake, c.unknownTakes))
	}
	c.inv[3].count("revocations", "%d", len(c.revoke))
	c.inv[3].count("revocations with a take waiting", "%d of %d", c.revokesWaiting, len(c.revoke))
	c.floors2and3()
	c.inv[2].Pass = len(c.inv[2].Violations) == 0
	c.evidence[3] = len(c.revoke)
	c.inv[3].count("late takes", "%d", len(c.inv[3].Violations))
	c.inv[3].Pass = len(c.inv[3].Violations) == 0
}

// judgeGhostTakes (invariant 2): a job the node says a key held (its
// record's pipeline_id, in Redis at the end or in its failure record)
// that no take handed that key: every API take is recorded as the proxy
// saw the node's answer, so a hold without one was written by no take a
// pipeline asked of the leader, e.g. a deposed leader's take that Redis
// ran after the lease had moved on (a write past the fence). A take made
// just as the leader was killed (answer never sent) is excused: it falls
// in a kill-leader window.
func (c *checker) judgeGhostTakes(dump Dump) {
	ids := map[string]string{}
	for k := range c.apiKeys {
		ids["pipeline:"+md5hex(apiPipelinePrefix+k)] = k
	}
	seen := map[string]bool{}
	for ident, ls := range c.lives {
		l := ls[len(ls)-1]
		var fields map[string]string
		how := ""
		if f := dump.Hash("archivebot:failed:" + ident); f != nil && f["failed_by"] == "reaper" {
			var job map[string]any
			if json.Unmarshal([]byte(f["job"]), &job) == nil {
				fields = map[string]string{}
				for k, v := range job {
					fields[k] = fmt.Sprint(v)
				}
			}
			how = "failed by the reaper"
		} else if h := dump.Hash(ident); h != nil && h["finished_at"] == "" && h["failed"] != "true" {
			fields, how = h, "running at the end"
		}
		key, ok := ids[fields["pipeline_id"]]
		if !ok || seen[ident] {
			continue
		}
		started, err := strconv.ParseFloat(fields["started_at"], 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, int64(started*1e9))
		if at.Before(c.res.Start) || !c.dumpFrom.IsZero() && at.After(c.dumpFrom.Add(-2*time.Second)) {
			continue // before the run, or too late for its take to be recorded
		}
		// The life it belongs to: taken at, by the model.
		var life *life
		for _, x := range ls {
			if !x.start.After(at.Add(c.opts.ProbeSlack)) {
				life = x
			}
		}
		if life == nil {
			life = l
		}
		taken := false
		for _, t := range life.trans {
			taken = taken || t.state == "running"
		}
		if taken || c.inKill(at) {
			continue
		}
		seen[ident] = true
		c.inv[2].violate(Violation{Ident: ident, T: at, Lines: []int{life.ackLine},
			Detail: fmt.Sprintf("held by key %s since %s (%s), but no take of it was seen (proxy, bridge or pipeline): a hold no take asked of the leader made (a write past the lease fence?)",
				key, at.UTC().Format("15:04:05.000"), how)})
	}
}

// inKill reports whether t falls in a kill-leader window (a take whose
// answer died with the node).
func (c *checker) inKill(t time.Time) bool {
	for _, f := range c.res.Faults {
		if f.Fault == "kill-leader" && !t.Before(f.Start.Add(-time.Second)) && !t.After(f.End) {
			return true
		}
	}
	return false
}

// apiPipelinePrefix: an API key's pipeline record is
// pipeline:<md5hex("api:" + name)> (doc/pipeline-api.md).
const apiPipelinePrefix = "api:"

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
