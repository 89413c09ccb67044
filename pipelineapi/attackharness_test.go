package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// attackRig is what the attack measurements (TestAttackMeasure,
// TestAttackBodies) share against a node running outside the test: its
// pipeline API at ATTACK_API and its store at ATTACK_REDIS.
type attackRig struct {
	t   *testing.T
	api string
	rdb *redis.Client
	st  *store.Store
	ctx context.Context
}

// newAttackRig skips t unless the environment variable on is set, then
// connects to ATTACK_REDIS (closed when t ends).
func newAttackRig(t *testing.T, on string) *attackRig {
	t.Helper()
	if os.Getenv(on) == "" {
		t.Skip(on + " not set")
	}
	opt, err := redis.ParseURL(os.Getenv("ATTACK_REDIS"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return &attackRig{t: t, api: os.Getenv("ATTACK_API"), rdb: rdb, st: store.New(rdb), ctx: context.Background()}
}

// attackEnvInt is the environment variable name as a positive number,
// or def.
func attackEnvInt(name string, def int) int {
	if n, _ := strconv.Atoi(os.Getenv(name)); n > 0 {
		return n
	}
	return def
}

// newKey registers a pipeline key name and returns a client of it over
// transport, once the node knows the key (its job request is answered
// not_held rather than refused) or after 10 s.
func (r *attackRig) newKey(name string, transport http.RoundTripper) *client.Client {
	pub, priv, _ := ed25519.GenerateKey(nil)
	if err := r.st.AddPipelineKey(r.ctx, name, wire.FormatPublicKey(pub)); err != nil {
		r.t.Fatal(err)
	}
	c, _ := client.New("http://"+r.api, name, priv, client.WithHTTPClient(&http.Client{Transport: transport}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Job(r.ctx, "none")
		if client.IsCode(err, "not_held") || time.Now().After(deadline) {
			return c
		}
		time.Sleep(100 * time.Millisecond)
	}
}
