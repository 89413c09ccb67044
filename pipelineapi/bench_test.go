package pipelineapi_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// BenchmarkAPITake measures one take through the pipeline API: a signed
// request over loopback HTTP, the take script, the record decoded and
// answered, with a job waiting on pending for every op.
func BenchmarkAPITake(b *testing.B) {
	run := func(b *testing.B, be *redistest.Backend) {
		ctx := context.Background()
		st := store.New(be.Client)
		srv := apitest.Serve(b, pipelineapi.Options{Store: st, Rate: 1e9, LogRate: 1e9})
		c := apitest.Client(b, st, srv.URL, "benchkey")
		for i := 0; i < b.N; i++ {
			id := "take" + strconv.Itoa(i)
			err := st.Register(ctx, store.NewJob{Ident: id, URL: "http://example.com/" + id, FetchDepth: "inf",
				Slug: "example.com-inf", StartedBy: "nick", StartedIn: "#chan", DelayMin: 250, DelayMax: 375,
				Concurrency: 3, Queue: store.KeyPending})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j, err := c.Take(ctx, wire.TakeRequest{})
			if err != nil || j == nil {
				b.Fatalf("take %d: %v %v", i, j, err)
			}
		}
	}
	b.Run("miniredis", func(b *testing.B) { run(b, redistest.Mini(b)) })
	b.Run("redis", func(b *testing.B) {
		be := redistest.RealRedis(b)
		if be == nil {
			b.Skip("ARCHIVEBOT_TEST_REDIS not set")
		}
		run(b, be)
	})
}
