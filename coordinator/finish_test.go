package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// svcNotice is a finish notification as a pipeline writes it.
func svcNotice(url, nick, channel string, aborted bool) string {
	b, _ := json.Marshal(map[string]any{
		"aborted": aborted, "fetch_depth": "inf", "pipeline_id": "pipeline:abc", "queued_at": 1700000000,
		"started_by": nick, "started_in": channel, "url": url, "url_file": nil,
	})
	return string(b)
}

func svcLists(t *testing.T, b *redistest.Backend) [2][]string {
	t.Helper()
	ctx := context.Background()
	q, err := b.Client.LRange(ctx, store.KeyFinishNotifications, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Client.LRange(ctx, store.KeyFinishProcessing, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return [2][]string{q, p}
}

// TestFinishNotifierJobLifecycle drives jobs through a simulated pipeline:
// queued → taken → logging → finished (or aborted after a published
// settings age), and the channel gets exactly one line per job, with the
// ident.
func TestFinishNotifierJobLifecycle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
		done := svcQueue(t, s, "http://finished.example.com/", "alice", "#ab", store.KeyPending)
		abort := svcQueue(t, s, "http://aborted.example.com/", "bob", "#other", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "sim"})
		ann := newSvcAnnouncer("#ab", "#other")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))

		j1, err := p.Take(ctx)
		if err != nil || j1 == nil || j1.Ident != done {
			t.Fatalf("take: %v %v", j1, err)
		}
		j2, err := p.Take(ctx)
		if err != nil || j2 == nil || j2.Ident != abort {
			t.Fatalf("take: %v %v", j2, err)
		}
		for i := range 5 {
			for _, j := range []*pipelinesim.Job{j1, j2} {
				if _, err := j.LogDownload(ctx, fmt.Sprintf("%spage%d", j.Fields["url"], i), 200); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if l := ann.take(); len(l) != 0 {
			t.Fatalf("lines before any job finished: %v", l)
		}

		// !abort on a running job: abort_requested plus a published age.
		age, err := b.Client.HIncrBy(ctx, abort, "settings_age", 1).Result()
		if err != nil {
			t.Fatal(err)
		}
		b.Client.HSet(ctx, abort, "abort_requested", "true")
		ended, err := j2.SettingsChanged(ctx, age)
		if err != nil || !ended {
			t.Fatalf("abort: ended=%v err=%v", ended, err)
		}
		if err := j1.Done(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := f.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := []svcLine{
			{"#other", fmt.Sprintf("bob: Your job for http://aborted.example.com/ was aborted. (%s)", abort)},
			{"#ab", fmt.Sprintf("alice: Your job for http://finished.example.com/ has finished. (%s)", done)},
		}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}
	})
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("nonil", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

// TestFinishNotifierDelivery covers what can go wrong between Redis and
// the channel.
func TestFinishNotifierDelivery(t *testing.T) {
	u := func(n int) string { return fmt.Sprintf("http://n%d.example.com/", n) }
	line := func(n int, nick string) string {
		return fmt.Sprintf("%s: Your job for %s has finished. (%s)", nick, u(n), ident.Of(u(n)))
	}
	tests := []struct {
		name       string
		queued     []string // finish_notifications
		processing []string // left by an earlier run
		cannot     []string // channels that cannot be joined
		want       []svcLine
	}{
		{
			name:   "in order",
			queued: []string{svcNotice(u(1), "a", "#ab", false), svcNotice(u(2), "b", "#ab", false)},
			want:   []svcLine{{"#ab", line(1, "a")}, {"#ab", line(2, "b")}},
		},
		{
			name:       "left in processing by a crash: delivered first",
			processing: []string{svcNotice(u(1), "a", "#ab", false)},
			queued:     []string{svcNotice(u(2), "b", "#ab", false)},
			want:       []svcLine{{"#ab", line(1, "a")}, {"#ab", line(2, "b")}},
		},
		{
			name: "malformed notices are dropped, the rest delivered",
			queued: []string{"{not json", `{"aborted":false,"started_by":"x"}`, `[1,2]`,
				svcNotice(u(3), "c", "#ab", false)},
			want: []svcLine{{"#ab", line(3, "c")}},
		},
		{
			name:   "channel that cannot be joined: logged and acknowledged",
			queued: []string{svcNotice(u(1), "a", "#gone", false), svcNotice(u(2), "b", "#ab", false)},
			cannot: []string{"#gone"},
			want:   []svcLine{{"#ab", line(2, "b")}},
		},
		{
			name:   "CR, LF and NUL from Redis are neutralized",
			queued: []string{svcNotice("http://x.example.com/a\r\nPRIVMSG #ab :pwned\x00", "ev\nil", "#ab", false)},
			want: []svcLine{{"#ab", fmt.Sprintf("ev il: Your job for http://x.example.com/a  PRIVMSG #ab :pwned has finished. (%s)",
				ident.Of("http://x.example.com/a\r\nPRIVMSG #ab :pwned\x00"))}},
		},
		{
			name:   "job queued from the console: every channel",
			queued: []string{svcNotice(u(1), "", "", true)},
			want: []svcLine{
				{"#ab", fmt.Sprintf("Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))},
				{"#other", fmt.Sprintf("Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))},
			},
		},
		{
			name: "aborted as a string, queued_at as a string, url_file set",
			queued: []string{`{"aborted":"true","fetch_depth":"shallow","pipeline_id":null,"queued_at":"1700000000",` +
				`"started_by":"a","started_in":"#ab","url":"` + u(1) + `","url_file":"` + u(1) + `"}`},
			want: []svcLine{{"#ab", fmt.Sprintf("a: Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				for _, d := range tc.queued {
					b.Client.RPush(ctx, store.KeyFinishNotifications, d)
				}
				for _, d := range tc.processing {
					b.Client.RPush(ctx, store.KeyFinishProcessing, d)
				}
				ann := newSvcAnnouncer("#ab", "#other")
				for _, c := range tc.cannot {
					ann.cannot[c] = true
				}
				f := NewFinishNotifier(store.NewStore(b.Client), ann, FinishConfig{}, svcLog(t))
				if err := f.runOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ann.take()); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
					t.Errorf("notices left in Redis (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestFinishNotifierIRCDown: while IRC is down nothing leaves Redis; when
// it is back every notice is delivered once, in order.
func TestFinishNotifierIRCDown(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var docs, lines []string
		for n := range 4 {
			url := fmt.Sprintf("http://down%d.example.com/", n)
			docs = append(docs, svcNotice(url, "a", "#ab", false))
			lines = append(lines, fmt.Sprintf("a: Your job for %s has finished. (%s)", url, ident.Of(url)))
		}
		b.Client.RPush(ctx, store.KeyFinishNotifications, docs[0], docs[1], docs[2])
		ann := newSvcAnnouncer("#ab")
		ann.setDown(errIRCDown)
		f := NewFinishNotifier(store.NewStore(b.Client), ann, FinishConfig{Batch: 2}, svcLog(t))
		for range 3 {
			if err := f.runOnce(ctx); err == nil {
				t.Fatal("cycle with IRC down succeeded")
			}
		}
		b.Client.RPush(ctx, store.KeyFinishNotifications, docs[3])
		if diff := cmp.Diff([2][]string{docs[1:], docs[:1]}, svcLists(t, b)); diff != "" {
			t.Errorf("Redis while IRC is down (-want +got):\n%s", diff)
		}
		// A restarted bot (a new notifier) with IRC back; Batch 2 per cycle.
		ann.setDown(nil)
		f = NewFinishNotifier(store.NewStore(b.Client), ann, FinishConfig{Batch: 2}, svcLog(t))
		var got []string
		for range 3 {
			if err := f.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range ann.take() {
				got = append(got, l.Text)
			}
		}
		if diff := cmp.Diff(lines, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}
	})
}
