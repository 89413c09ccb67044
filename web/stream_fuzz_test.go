package web

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"
)

// FuzzStreamClientMessage feeds raw bytes to the handling of a client
// message of our protocol (/stream?v=2): it must never panic, must answer
// every message with exactly one notice, "error" (and the filter
// unchanged) or "subscribed" (only for JSON; the filter in force holds at
// most 10000 idents), and give back every byte it queued.
func FuzzStreamClientMessage(f *testing.F) {
	for _, s := range []string{`{"subscribe":"all"}`, `{"subscribe":["a","b","a"]}`, `{"errors_only":true}`,
		`{"subscribe":"*","errors_only":false}`, `{"subscribe":5}`, `null`, `[]`, `{"subscribe":[1]}`,
		`{"subscribe":null}`, "\xff", `{"subscribe":["\u0000"]}`, ``, `{"errors_only":"yes"}`} {
		f.Add([]byte(s))
	}
	hub := NewHub(HubOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Fuzz(func(t *testing.T, msg []byte) {
		c := &client{hub: hub, v2: true, lim: queueLimits{frames: 4, bytes: 1 << 20, total: &hub.queued,
			maxTot: 1 << 30, maxAge: time.Hour}, signal: make(chan struct{}, 1), done: make(chan struct{})}
		c.setFilter(false, []string{"x"}, true)
		key0, _, _, _ := c.filter()
		c.handleMsg(msg)
		if len(c.events) != 1 {
			t.Fatalf("%d notices for one message", len(c.events))
		}
		f, _, ok := c.next(time.Now())
		if !ok {
			t.Fatal("no notice")
		}
		key, all, subs, _ := c.filter()
		if len(subs) > 10000 || (all && subs != nil) {
			t.Fatalf("filter %q: all %v, %d idents", key, all, len(subs))
		}
		if _, err := json.Marshal(c.filterDoc()); err != nil {
			t.Fatalf("filter doc: %v", err)
		}
		switch f.note {
		case "error":
			if key != key0 {
				t.Fatalf("a refused message changed the filter: %q -> %q", key0, key)
			}
		case "subscribed":
			if !json.Valid(msg) {
				t.Fatalf("%q is not JSON but was accepted", msg)
			}
		default:
			t.Fatalf("answered %q", f.note)
		}
		if c.hub.queued.Load() != 0 {
			t.Fatalf("%d bytes still counted as queued", c.hub.queued.Load())
		}
	})
}
