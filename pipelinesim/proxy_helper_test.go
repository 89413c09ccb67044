package pipelinesim_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/store"
)

// proxiedNode is a pipeline API node on miniredis behind a stand-in
// proxy whose handler the test writes: it may pass a request on, or
// run it at the node and then answer as it likes (lose the answer,
// delay it, refuse it).
type proxiedNode struct {
	b  *redistest.Backend
	st *store.Store
	rp *httputil.ReverseProxy
}

func newProxiedNode(t *testing.T) *proxiedNode {
	b := redistest.Mini(t)
	st := store.New(b.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, KeyRefresh: 20 * time.Millisecond})
	target, _ := url.Parse(hs.URL)
	return &proxiedNode{b: b, st: st, rp: httputil.NewSingleHostReverseProxy(target)}
}

// pass sends r on to the node and its answer back.
func (n *proxiedNode) pass(w http.ResponseWriter, r *http.Request) { n.rp.ServeHTTP(w, r) }

// run has the node answer r, into a recorder the proxy answers from
// (answer) or not.
func (n *proxiedNode) run(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	n.rp.ServeHTTP(rec, r)
	return rec
}

// answer writes the node's recorded answer.
func answer(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// front serves h as the proxy and returns its URL.
func (n *proxiedNode) front(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
