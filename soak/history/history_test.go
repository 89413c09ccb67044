package history

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	want := []Event{
		{T: t0, Kind: Send, Actor: "erin", Channel: "#a", Text: "!a http://example.com/", ID: 1},
		{T: t0.Add(time.Second), Kind: Reply, Actor: "erin", ID: 1, Text: "erin: Queued", Num: map[string]float64{"latency_ms": 12}},
		{T: t0.Add(2 * time.Second), Kind: Take, Actor: "pipe-1", Via: "api", Target: "pipe-1", Ident: "abc"},
	}
	for _, e := range want {
		r.Add(e)
	}
	r.Add(Event{Kind: Note, Text: "stamped"})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].T.IsZero() {
		t.Fatalf("got %d events, last %+v; want 4 with the last stamped", len(got), got[len(got)-1])
	}
	if d := cmp.Diff(want, got[:3]); d != "" {
		t.Fatalf("round trip (-want +got):\n%s", d)
	}
}
