package pipelineapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

type replies struct{ lines []string }

func (r *replies) Reply(text string)   { r.lines = append(r.lines, text) }
func (r *replies) Private(text string) { r.lines = append(r.lines, text) }

// An API pipeline and a direct-Redis pipeline side by side: /pipelines,
// !whereis and !jobs show both, the API one by its key name, and
// /logs/recent shows the API job's entries from memory.
func TestSideBySide(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("api-pipe", "apijob")
		if _, err := c.Report(ctx, map[string]string{"nickname": "upstream-nick", "version": "20250101.01"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Update(ctx, "apijob", wire.UpdateRequest{Log: []json.RawMessage{
			json.RawMessage(`{"type":"download","url":"http://example.com/x","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false}`)}}); err != nil {
			t.Fatal(err)
		}
		h.queue("directjob", store.KeyPending)
		direct := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "direct-pipe"})
		if err := direct.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		if dj, err := direct.Take(ctx); err != nil || dj == nil || dj.Ident != "directjob" {
			t.Fatalf("direct take %v %v", dj, err)
		}

		ws := web.New(web.Options{Store: h.store, RecentAPI: h.srv.Recent})
		hs := httptest.NewServer(ws.Handler())
		defer hs.Close()
		get := func(path string) string {
			req, _ := http.NewRequest("GET", hs.URL+path, nil)
			req.Header.Set("Accept", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return string(body)
		}
		var ps struct {
			Pipelines []map[string]string `json:"pipelines"`
		}
		if err := json.Unmarshal([]byte(get("/pipelines")), &ps); err != nil {
			t.Fatal(err)
		}
		nicks := map[string]string{}
		for _, p := range ps.Pipelines {
			nicks[p["nickname"]] = p["id"]
		}
		if nicks["api-pipe"] != store.APIPipelineKey("api-pipe") || nicks["direct-pipe"] == "" {
			t.Errorf("/pipelines shows %v", nicks)
		}
		recent := get("/logs/recent")
		if !strings.Contains(recent, `"url":"http://example.com/x"`) {
			t.Errorf("/logs/recent lacks the API job's entry: %s", recent)
		}

		bt := bot.New(h.store, bot.Options{})
		for ident, want := range map[string]string{"apijob": `pipeline "api-pipe"`, "directjob": `pipeline "direct-pipe"`} {
			r := &replies{}
			bt.Handle(ctx, bot.Request{Nick: "carol", Channel: "#chan", Rank: bot.RankOp, Text: "!whereis " + ident}, r)
			if len(r.lines) != 1 || !strings.Contains(r.lines[0], want) {
				t.Errorf("!whereis %s: %q, want %s", ident, r.lines, want)
			}
		}
		for nick, ident := range map[string]string{"api-pipe": "apijob", "direct-pipe": "directjob"} {
			r := &replies{}
			bt.Handle(ctx, bot.Request{Nick: "carol", Channel: "#chan", Rank: bot.RankOp, Text: "!jobs " + nick}, r)
			if all := strings.Join(r.lines, "\n"); !strings.Contains(all, ident) {
				t.Errorf("!jobs %s: %q", nick, all)
			}
		}
	})
}
