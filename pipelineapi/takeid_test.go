package pipelineapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// loseTake is a transport between the client and the node that passes
// every request on, but loses the node's answer to the first take: the
// take ran on the node, the client gets an error (err) or, when status is
// set, that status from a proxy instead of the answer.
type loseTake struct {
	status int
	mu     sync.Mutex
	takes  int
	bodies []string // the take requests' bodies, as sent
}

func (l *loseTake) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != wire.PathTake {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	l.mu.Lock()
	l.takes++
	first := l.takes == 1
	l.bodies = append(l.bodies, string(body))
	l.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !first {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("loseTake: the first take was not answered 200 but " + resp.Status)
	}
	if l.status == 0 {
		return nil, errors.New("loseTake: the answer was lost")
	}
	return &http.Response{StatusCode: l.status, Status: http.StatusText(l.status), Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("proxy: upstream went away")), Request: r}, nil
}

func (l *loseTake) sent() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takes, slices.Clone(l.bodies)
}

// A take whose answer is lost after it ran on the node (the answer lost
// on the way, or a proxy's 502 for it) is retried by the client with the
// same take_id and gets the same job: one job left the queue and the key
// holds one, which the pipeline knows and can work on.
func TestTakeAnswerLostRetriedGetsTheSameJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"transport error", 0}, {"proxy 502", http.StatusBadGateway}} {
		t.Run(tc.name, func(t *testing.T) {
			eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
				lose := &loseTake{status: tc.status}
				c := h.addKey("pipe-1", client.WithHTTPClient(&http.Client{Transport: lose}))
				h.queue("j1", store.KeyPending)
				h.queue("j2", store.KeyPending)
				again := takesAnsweredAgain("pipe-1")
				j, err := c.Take(ctx, wire.TakeRequest{})
				if err != nil {
					t.Fatalf("take: %v (the client did not retry the take whose answer was lost)", err)
				}
				if j == nil || j.Ident != "j1" {
					t.Fatalf("take = %+v, want j1: the retry took another job", j)
				}
				n, bodies := lose.sent()
				if n != 2 {
					t.Fatalf("%d takes sent, want 2 (the lost one and its retry)", n)
				}
				if bodies[0] != bodies[1] || !strings.Contains(bodies[0], `"take_id":"`) {
					t.Fatalf("the retry's body %s is not the first's %s with a take_id", bodies[1], bodies[0])
				}
				if got, _ := b.Client.LRange(ctx, store.KeyPending, 0, -1).Result(); !slices.Equal(got, []string{"j2"}) {
					t.Fatalf("pending = %v, want [j2]: one job taken", got)
				}
				if got, _ := b.Client.LRange(ctx, store.KeyWorking, 0, -1).Result(); !slices.Equal(got, []string{"j1"}) {
					t.Fatalf("working = %v, want [j1]", got)
				}
				if got, _ := b.Client.SMembers(ctx, store.KeyPipelineKeyJobs("pipe-1")).Result(); !slices.Equal(got, []string{"j1"}) {
					t.Fatalf("pipe-1 holds %v, want [j1]", got)
				}
				if d := takesAnsweredAgain("pipe-1") - again; d != 1 {
					t.Fatalf("archivebot_pipelineapi_takes_answered_again_total rose by %v, want 1", d)
				}
				if _, err := c.Heartbeat(ctx, j.Ident); err != nil {
					t.Fatalf("heartbeat of the job answered again: %v", err)
				}
				if _, err := c.Done(ctx, j.Ident); err != nil {
					t.Fatalf("done: %v", err)
				}
			})
		})
	}
}

func takesAnsweredAgain(key string) float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "archivebot_pipelineapi_takes_answered_again_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, p := range m.GetLabel() {
				if p.GetName() == "key" && p.GetValue() == key {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
