package check

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// TestDemoReport writes a synthetic 20-minute run with faults into the
// directory SOAKCHECK_DEMO names, checks it and renders its report and
// picture there: a way to look at the report without a soak. Skipped
// unless SOAKCHECK_DEMO is set.
func TestDemoReport(t *testing.T) {
	dir := os.Getenv("SOAKCHECK_DEMO")
	if dir == "" {
		t.Skip("SOAKCHECK_DEMO not set")
	}
	r := demo(1200, 1.5)
	f, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.events {
		f.Add(e)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.dump)
	if err := os.WriteFile(filepath.Join(dir, "final_redis.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Summary())
}

// BenchmarkCheck checks an hour's synthetic run with a job queued every
// 0.1 s (36,000 jobs, about 330,000 events) per iteration.
func BenchmarkCheck(b *testing.B) {
	r := demo(3600, 0.1)
	b.ResetTimer()
	for range b.N {
		if res := Check(r.events, r.dump, DefaultOptions()); res.Failed() {
			b.Fatal(res.Summary())
		}
	}
	b.ReportMetric(float64(len(r.events)), "events")
}

// demo is a synthetic run of length seconds with faults, flat
// resources, a job queued every `every` seconds, ignores and probes.
func demo(length, every float64) *run {
	r := &run{t0: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC), dump: Dump{}}
	rng := rand.New(rand.NewPCG(28, 28))
	faults := []struct {
		name, target string
		at, d        float64
	}{{"kill-leader", "node-a", 200, 8}, {"kill-redis-master", "redis-1", 420, 12}, {"partition-pipeline-node", "p3", 600, 20},
		{"freeze-leader", "node-b", 780, 15}, {"revoke-waiting", "key7", 900, 1}, {"clock-skew", "node-a", 1000, 60}}
	inFault := func(s float64) bool {
		for _, f := range faults {
			if s >= f.at && s <= f.at+f.d {
				return true
			}
		}
		return false
	}
	for _, f := range faults {
		r.add(f.at, history.Event{Kind: history.Fault, Fault: f.name, Target: f.target, Outcome: "start"})
		r.add(f.at+f.d, history.Event{Kind: history.Fault, Fault: f.name, Target: f.target, Outcome: "end"})
	}
	for s := 0.0; s <= length; s += 5 {
		for i, node := range []string{"node-a", "node-b"} {
			base := 60e6 + float64(i)*10e6
			if node == "node-a" && s > 200 {
				base = 45e6 // restarted by the kill
			}
			r.add(s, history.Event{Kind: history.Sample, Actor: node, Num: map[string]float64{
				"rss_bytes": base + rng.Float64()*4e6, "goroutines": 300 + float64(rng.IntN(40)), "fds": 60 + float64(rng.IntN(8))}})
		}
		r.add(s, history.Event{Kind: history.Sample, Actor: "redis", Num: map[string]float64{"redis_used_memory": 20e6 + rng.Float64()*3e6}})
		frames := 1000 + float64(rng.IntN(200))
		if s >= 200 && s < 206 {
			frames = 0
		}
		r.add(s+1, history.Event{Kind: history.Stream, Actor: "viewer-1", Via: "v2", Num: map[string]float64{"frames": frames, "entries": 10 * frames, "gaps": 0, "lag_p99_ms": 30 + rng.Float64()*50}})
	}
	n := 0
	type done struct {
		id  string
		rep float64
	}
	var finished []done
	for s := 2.0; s < length-60; s += every {
		n++
		url := fmt.Sprintf("http://site%d.example/", n)
		nick := fmt.Sprintf("user%d", n%10)
		lat := 0.05 + rng.ExpFloat64()*0.08
		if inFault(s) {
			lat += 3
		}
		id := ident.Of(url)
		r.command(s, lat, nick, "!a "+url, "Queued "+url+".")
		take := s + 1 + rng.Float64()*5
		pipe := fmt.Sprintf("p%d", rng.IntN(50))
		r.take(take, pipe, "key-"+pipe, id)
		end := take + 5 + rng.Float64()*40
		if end > length-5 {
			r.set(id, "hash", registeredJob(url, nick, "started_at", "1"))
			continue
		}
		r.end(end, pipe, id, "done")
		rep := end + 0.2 + rng.ExpFloat64()*0.3
		if inFault(end) {
			rep += 4
		}
		r.line(rep, nick+": Your job for "+url+" has finished. ("+id+")")
		finished = append(finished, done{id, rep})
		if n%(int(37/every)) == 0 {
			r.command(take+1, 0.1, nick, "!ig "+id+" ^x", "Added ignore pattern ^x to job "+id+".")
			r.probe(take+2, "jobs_api", id, "running", `{"state":"running","ignore_patterns":["^x"]}`)
		}
		r.set(id, "hash", registeredJob(url, nick, "started_at", "1", "finished_at", "2"))
	}
	for s := 3.0; s < length; s += 2.3 {
		lat := 0.03 + rng.ExpFloat64()*0.05
		if inFault(s) {
			lat += 2
		}
		r.command(s, lat, "user3", "!status", "Job status: …")
	}
	r.add(900.5, history.Event{Kind: history.Revoke, Target: "key7"})
	r.add(length-50, history.Event{Kind: history.Quiet, Outcome: "start"})
	probed := 0
	for _, d := range finished {
		if d.rep < length-60 && d.rep > length-200 && probed < 50 {
			probed++
			r.probe(length-49, "jobs_api", d.id, "finished", "")
			r.probe(length-48, "status", d.id, "finished", "")
			r.probe(length-47, "dashboard", d.id, "finished", "")
		}
	}
	r.add(length-40, history.Event{Kind: history.Quiet, Outcome: "end"})
	r.add(length, history.Event{Kind: history.Final, Text: "final_redis.json"})
	return r
}
