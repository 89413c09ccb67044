package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// node is a stand-in pipeline API that answers takes with answer(n, req)
// (n counts from 1) and records the take requests and their nonces.
type node struct {
	mu     sync.Mutex
	reqs   []wire.TakeRequest
	nonces []string
	answer func(n int, body []byte) (int, string)
}

func (nd *node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var tr wire.TakeRequest
	_ = json.Unmarshal(body, &tr)
	nd.mu.Lock()
	nd.reqs = append(nd.reqs, tr)
	nd.nonces = append(nd.nonces, r.Header.Get(wire.HeaderNonce))
	n := len(nd.reqs)
	nd.mu.Unlock()
	status, out := nd.answer(n, body)
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	io.WriteString(w, out)
}

func (nd *node) takes() []wire.TakeRequest {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return append([]wire.TakeRequest(nil), nd.reqs...)
}

func newClient(t *testing.T, nd *node) *client.Client {
	t.Helper()
	hs := httptest.NewServer(nd)
	t.Cleanup(hs.Close)
	_, priv, _ := ed25519.GenerateKey(nil)
	c, err := client.New(hs.URL, "pipe-1", priv,
		client.WithTakeRetry(client.Retry{Attempts: 4, Min: time.Millisecond, Max: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const jobAnswer = `{"job":{"ident":"j1","queue":"pending","pipeline_id":"pipeline:x","fields":{"url":"http://example.com/"},"ignores":[]}}`

// A take answered 5xx (a 503 retry, a proxy's 502) is sent again with
// the same take_id, signed anew; a 4xx is not sent again.
func TestTakeRetriesUnknownOutcomesWithOneTakeID(t *testing.T) {
	nd := &node{answer: func(n int, _ []byte) (int, string) {
		switch n {
		case 1:
			return http.StatusServiceUnavailable, `{"error":"retry","reason":"the store did not answer"}`
		case 2:
			return http.StatusBadGateway, `proxy: upstream reset`
		}
		return http.StatusOK, jobAnswer
	}}
	c := newClient(t, nd)
	j, err := c.Take(context.Background(), wire.TakeRequest{})
	if err != nil || j == nil || j.Ident != "j1" {
		t.Fatalf("take = %+v, %v; want j1 after two retries", j, err)
	}
	takes := nd.takes()
	if len(takes) != 3 || !wire.ValidTakeID(takes[0].TakeID) || takes[1].TakeID != takes[0].TakeID || takes[2].TakeID != takes[0].TakeID {
		t.Fatalf("takes sent %+v, want 3 with one valid take_id", takes)
	}
	if nd.nonces[0] == nd.nonces[1] || nd.nonces[1] == nd.nonces[2] {
		t.Fatalf("nonces %v reused: every send is signed anew", nd.nonces)
	}
	// The next take has a take_id of its own.
	if _, err := c.Take(context.Background(), wire.TakeRequest{}); err != nil {
		t.Fatal(err)
	}
	if takes := nd.takes(); takes[3].TakeID == takes[0].TakeID {
		t.Fatal("the next take reused the take_id")
	}

	refused := &node{answer: func(int, []byte) (int, string) {
		return http.StatusForbidden, `{"error":"forbidden_queue","reason":"no"}`
	}}
	c = newClient(t, refused)
	if _, err := c.Take(context.Background(), wire.TakeRequest{}); !client.IsCode(err, "forbidden_queue") {
		t.Fatalf("take = %v, want the forbidden_queue refusal", err)
	}
	if n := len(refused.takes()); n != 1 {
		t.Fatalf("a 403 was sent %d times, want once", n)
	}

	down := &node{answer: func(int, []byte) (int, string) {
		return http.StatusServiceUnavailable, `{"error":"retry","reason":"down"}`
	}}
	c = newClient(t, down)
	if _, err := c.Take(context.Background(), wire.TakeRequest{}); !client.IsCode(err, "retry") {
		t.Fatalf("take = %v, want the last 503", err)
	}
	if n := len(down.takes()); n != 4 {
		t.Fatalf("sent %d times, want the 4 attempts", n)
	}
}

// A node older than take_id refuses the field as unknown: the client
// takes without it (nothing was taken by the refusal), and keeps doing
// so for a while.
func TestTakeWithoutTakeIDOnAnOldNode(t *testing.T) {
	nd := &node{answer: func(_ int, body []byte) (int, string) {
		if bytes.Contains(body, []byte(`"take_id"`)) {
			return http.StatusBadRequest, `{"error":"bad_request","reason":"body: json: unknown field \"take_id\""}`
		}
		return http.StatusOK, jobAnswer
	}}
	c := newClient(t, nd)
	for i := range 2 {
		j, err := c.Take(context.Background(), wire.TakeRequest{})
		if err != nil || j == nil {
			t.Fatalf("take %d on an old node: %+v %v", i, j, err)
		}
	}
	takes := nd.takes()
	if len(takes) != 3 || takes[0].TakeID == "" || takes[1].TakeID != "" || takes[2].TakeID != "" {
		t.Fatalf("takes sent %+v, want one with take_id, then two without", takes)
	}
}
