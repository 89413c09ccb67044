package check

// Evidence floors: each invariant states the least evidence it needs to
// be judged, and a run below it fails, as a run with nothing to check
// does. A run that revoked a key nobody used again, or whose viewers
// carried no entries outside faults, proves nothing about those promises.

import (
	"fmt"
	"sort"
	"strings"
)

// evidenceOf names what each invariant needs to have checked anything.
var evidenceOf = [9]string{8: "v2 viewer intervals outside faults that carried entries", 2: "takes", 3: "key revocations", 4: "acknowledged changes judged against a job's record or history",
	5: "probes", 6: "resource samples with a limit (enough after warm-up)", 7: "replies outside fault windows"}

// changeKinds are the kinds of acknowledged change invariant 4 needs to
// have judged at least once each, by the name the report gives them.
var changeKinds = []struct {
	kind sayKind
	name string
}{{sayIgnore, "ignore"}, {sayUnignore, "unignore"}, {sayDelay, "delay"}, {sayConc, "concurrency"}, {sayAbort, "abort"}}

func changeKindName(k sayKind) string {
	for _, x := range changeKinds {
		if x.kind == k {
			return x.name
		}
	}
	return fmt.Sprint(int(k))
}

// below records that invariant n fell below one of its floors.
func (c *checker) below(n int, format string, args ...any) {
	c.short[n] = append(c.short[n], fmt.Sprintf(format, args...))
}

// floors2and3 works out the floors of invariants 2 and 3: takes by
// every kind of pipeline; for each revoked key, a take it attempted after
// its revocation, and the node's refusal.
func (c *checker) floors2and3() {
	var kinds []string
	for _, k := range c.opts.PipelineKinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, c.takesByVia[k]))
		if c.takesByVia[k] == 0 {
			c.below(2, "no take by a %s pipeline (every kind of pipeline must have taken a job: %s)", k, strings.Join(c.opts.PipelineKinds, ", "))
		}
	}
	if len(kinds) > 0 {
		c.inv[2].count("takes by kind of pipeline", "%s", strings.Join(kinds, ", "))
	}
	var keys []string
	for k := range c.revoke {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	refused := 0
	for _, k := range keys {
		r := c.revoke[k]
		n := 0
		for _, e := range c.refusedTakes {
			if e.Target == k && !e.T.Before(r.T.Add(-c.opts.RevokeGrace)) && refusedForKey(e.Text) {
				n++
			}
		}
		refused += n
		if n == 0 {
			c.below(3, "key %s, revoked at %s (history line %d), attempted no take after its revocation that the node refused: nothing shows the revocation bound",
				k, r.T.UTC().Format("15:04:05.000"), r.line)
		}
	}
	c.inv[3].count("takes attempted by revoked keys and refused", "%d", refused)
}

// refusedForKey reports whether a refused take's code is a refusal of the
// key itself (not, say, a proxy's 503 while no node led).
func refusedForKey(code string) bool {
	return code == "revoked_key" || code == "unknown_key"
}

// floor4 is invariant 4's floor: every kind of change acknowledged and
// judged at least once.
func (c *checker) floor4(judged map[sayKind]int) {
	var parts []string
	for _, k := range changeKinds {
		parts = append(parts, fmt.Sprintf("%s %d", k.name, judged[k.kind]))
		if judged[k.kind] == 0 {
			c.below(4, "no %s change was acknowledged and judged (every kind must be: %s)", k.name, kindList())
		}
	}
	c.inv[4].count("changes judged by kind", "%s", strings.Join(parts, ", "))
}

func kindList() string {
	var out []string
	for _, k := range changeKinds {
		out = append(out, k.name)
	}
	return strings.Join(out, ", ")
}

// judgeFloors fails an invariant that had nothing to check or fell below
// one of its floors, unless Options.AllowEmpty: a run that never revoked
// a key proves nothing about revoked keys, and its report must not say
// PASS.
func (c *checker) judgeFloors() {
	for n := 2; n <= 8; n++ {
		inv := c.inv[n]
		var why []string
		if c.evidence[n] == 0 {
			why = append(why, "nothing to check: the run recorded no "+evidenceOf[n])
		}
		for _, s := range c.short[n] {
			why = append(why, "evidence floor: "+s)
		}
		for _, w := range why {
			if c.opts.AllowEmpty {
				inv.Notes = append(inv.Notes, w)
				continue
			}
			inv.violate(Violation{T: c.res.Start, T2: c.res.End, Detail: w + " (soakcheck -allow-empty to pass anyway)"})
			inv.Pass = false
		}
	}
}
