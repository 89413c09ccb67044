package soak

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// standInCLI stands in for the archivebot binary in the fault's calls:
// `pipeline-key -config DIR revoke NAME` leaves DIR/revoked-NAME, `bridge
// -init -key FILE -name NAME` a key file's stand-in.
const standInCLI = `#!/bin/sh
if [ "$1" = pipeline-key ] && [ "$4" = revoke ]; then : > "$3/revoked-$5"; fi
if [ "$1" = bridge ]; then echo stand-in > "$4"; chmod 600 "$4"; echo ed25519:stand-in; fi
exit 0
`

// takeNode stands in for the leader's pipeline API: takes long-poll
// their queues (pending:NAME jobs come from its bot), and a key revoked
// (DIR/revoked-NAME) is refused at the door; a waiting take is ended at
// its revocation unless planted (the long-poll-ignores-revocation plant:
// it goes on waiting and is handed the next job).
type takeNode struct {
	dir     string
	planted bool
	mu      sync.Mutex
	queues  map[string][]string
}

func (n *takeNode) revoked(key string) bool {
	_, err := os.Stat(filepath.Join(n.dir, "revoked-"+key))
	return err == nil
}

func (n *takeNode) push(queue, ident string) {
	n.mu.Lock()
	n.queues[queue] = append(n.queues[queue], ident)
	n.mu.Unlock()
}

func (n *takeNode) pop(queues []string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, q := range queues {
		if l := n.queues[q]; len(l) > 0 {
			n.queues[q] = l[1:]
			return l[0]
		}
	}
	return ""
}

func (n *takeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(wire.HeaderKey)
	var tr wire.TakeRequest
	if r.URL.Path != wire.PathTake || json.NewDecoder(r.Body).Decode(&tr) != nil {
		http.Error(w, "not a take", http.StatusBadRequest)
		return
	}
	refuse := func(reason string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(wire.Error{Error: "revoked_key", Reason: "key " + key + " was revoked" + reason})
	}
	if n.revoked(key) {
		refuse("")
		return
	}
	deadline := time.Now().Add(time.Duration(tr.WaitMS) * time.Millisecond)
	for {
		if ident := n.pop(tr.Queues); ident != "" {
			json.NewEncoder(w).Encode(wire.TakeResponse{Job: &wire.Job{Ident: ident, Queue: tr.Queues[0]}})
			return
		}
		if !n.planted && n.revoked(key) {
			refuse(" or replaced while the take waited")
			return
		}
		if time.Now().After(deadline) || r.Context().Err() != nil {
			json.NewEncoder(w).Encode(wire.TakeResponse{})
			return
		}
		time.Sleep(10 * time.Millisecond) // a look at the queue and the key, as the node's poll
	}
}

// TestRevokeWaitingRevokesAWaitingTake: the revoke-waiting fault revokes
// a key while one of its takes waits in the node's long-poll (the API
// proxy saw it in flight), and queues a job for that take's queue past
// invariant 3's grace. Against a stand-in node that ends a waiting take
// at its revocation, the take is refused (revoked_key) after the
// revocation; against one that does not (the planted bug), the proxy
// records the job handed to the revoked key more than the grace after
// the revocation: the late take invariant 3 judges.
func TestRevokeWaitingRevokesAWaitingTake(t *testing.T) {
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	prober := irctest.Dial(t, irc.Addr(), "prober")
	prober.Join(channel)
	for i, planted := range []bool{false, true} {
		t.Run(fmt.Sprintf("planted=%v", planted), func(t *testing.T) {
			dir := t.TempDir()
			cli := filepath.Join(dir, "archivebot")
			if err := os.WriteFile(cli, []byte(standInCLI), 0o755); err != nil {
				t.Fatal(err)
			}
			tn := &takeNode{dir: dir, planted: planted, queues: map[string][]string{}}
			// The stand-in's bot: each !a URL --pipeline=NAME queues the
			// URL's job to pending:NAME.
			nick := fmt.Sprintf("%s_%d", botNick, i)
			bot := irctest.Dial(t, irc.Addr(), nick)
			bot.Join(channel)
			prober.WaitBotPresent(nick, channel)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					m, err := bot.WaitWithin(200*time.Millisecond, "an !a", func(m ircmsg.Message) bool {
						return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.HasPrefix(m.Params[1], "!a ")
					})
					if err != nil {
						continue
					}
					f := strings.Fields(m.Params[1])
					name, ok := strings.CutPrefix(f[len(f)-1], "--pipeline=")
					if len(f) != 3 || !ok {
						bot.Say(channel, m.Nick()+": Sorry, the stand-in queues only !a URL --pipeline=NAME.")
						continue
					}
					tn.push("pending:"+name, "job-"+name)
					bot.Say(channel, m.Nick()+": Queued "+f[1]+" for pipeline "+name+".")
				}
			}()
			defer func() { close(stop); wg.Wait(); bot.Close() }()
			keyFile := filepath.Join(dir, "api00.key")
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(keyFile, []byte("# a pipeline key\nname: api00\nprivate: "+base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "history.jsonl")
			rec, err := history.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			s := &soak{t: t, seed: 5, rec: rec, jobs: newJobList(10), prober: prober, bin: cli, work: dir,
				nodes:    [2]*node{{name: "node-a", cfg: dir}, {name: "node-b", cfg: dir}},
				pipes:    []*pipe{{name: "api00", uid: os.Getuid(), via: viaAPI, key: "api00", args: []string{"-key", keyFile}}},
				injected: map[string]int{}, skipped: map[string][]string{}}
			nodeSrv := httptest.NewServer(tn)
			defer nodeSrv.Close()
			proxy := httptest.NewServer(s.proxyHandler(func() string { return strings.TrimPrefix(nodeSrv.URL, "http://") }))
			defer proxy.Close()
			s.api = strings.TrimPrefix(proxy.URL, "http://")
			s.runFault(step{What: "revoke-waiting", Dur: 2 * time.Second})
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			if s.injected["revoke-waiting"] != 1 {
				t.Fatalf("the fault was not injected: %v", s.skipped)
			}
			evs, err := history.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var revoke, begun *history.Event
			var answers []history.Event
			for i, e := range evs {
				switch {
				case e.Kind == history.Fault && e.Fault == "revoke-waiting" && e.Outcome == "start":
					begun = &evs[i]
				case e.Kind == history.Revoke && e.Target == "api00":
					revoke = &evs[i]
				case e.Kind == history.Take && e.Via == history.ViaProxy && e.Target == "api00":
					answers = append(answers, e)
				}
			}
			if revoke == nil || begun == nil {
				t.Fatalf("no revocation of api00 (and the fault's start) recorded: %+v", evs)
			}
			if revoke.Num["takes_waiting"] < 1 {
				t.Errorf("the revocation recorded %v takes waiting, want at least 1", revoke.Num)
			}
			// The take waiting at the revocation: asked before the
			// fault began, just before the revocation (by its time in
			// flight at the proxy), answered after it began (a node may
			// end it before the command returns).
			var waited *history.Event
			for i, e := range answers {
				asked := e.T.Add(-time.Duration(e.Num["wait_ms"] * float64(time.Millisecond)))
				if e.Num["wait_ms"] > 0 && asked.Before(begun.T) && e.T.After(begun.T) {
					waited = &answers[i]
				}
			}
			if waited == nil {
				t.Fatalf("no take of api00 was in flight when its revocation began (%v) and answered after it; the key's takes at the proxy: %+v", begun.T, answers)
			}
			late := waited.T.Sub(revoke.T)
			switch {
			case planted && (history.Refused(*waited) || waited.Ident != "job-api00" || late <= time.Second):
				t.Errorf("the planted node's waiting take was answered %+v, %v after the revocation; want job-api00 handed more than 1 s after it", waited, late)
			case !planted && (!history.Refused(*waited) || waited.Text != "revoked_key"):
				t.Errorf("the waiting take was answered %+v; want refused revoked_key", waited)
			}
		})
	}
}
