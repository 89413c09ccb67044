package embeddedredis_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/embeddedredis"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// benchServer starts an embedded server, persisted in a temporary
// directory or not, and a client for it with the acknowledgement hook
// the control node installs (when the server has one).
func benchServer(b *testing.B, persisted bool) (*embeddedredis.Server, *redis.Client) {
	b.Helper()
	opts := embeddedredis.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}
	if persisted {
		opts.DataDir = b.TempDir()
	}
	srv, err := embeddedredis.Start(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	if h, ok := any(srv).(interface{ SyncHook() redis.Hook }); ok {
		rdb.AddHook(h.SyncHook())
	}
	b.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

// benchJob is the job "!a URL" registers, with the default settings.
func benchJob(ident, url string) store.NewJob {
	return store.NewJob{Ident: ident, URL: url,
		FetchDepth: "inf", Slug: "x-inf", StartedBy: "alice", StartedIn: "#a", DelayMin: 250,
		DelayMax: 375, Concurrency: 3, SettingsAge: 4, Queue: store.KeyPending}
}

// BenchmarkAcknowledgedCommand measures what an acknowledged command
// costs: registering a job (the register script via EVALSHA) as "!a"
// does, until the reply may be given — with persistence, including
// making it durable.
func BenchmarkAcknowledgedCommand(b *testing.B) {
	for _, persisted := range []bool{false, true} {
		b.Run(fmt.Sprintf("persisted=%v", persisted), func(b *testing.B) {
			_, rdb := benchServer(b, persisted)
			st := store.New(rdb)
			ctx := context.Background()
			i := 0
			report := embeddedredis.StartCPU()
			for b.Loop() {
				i++
				id := fmt.Sprintf("bench%07d", i)
				if err := st.Register(ctx, benchJob(id, "http://"+id+".example/")); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
}

// BenchmarkPipelineLogEntry measures one log entry a pipeline ships: its
// log script (ZADD to the job's log, HINCRBY of the log score, PUBLISH)
// through EVALSHA, from a client without the acknowledgement hook, as a
// pipeline's is.
func BenchmarkPipelineLogEntry(b *testing.B) {
	for _, persisted := range []bool{false, true} {
		b.Run(fmt.Sprintf("persisted=%v", persisted), func(b *testing.B) {
			srv, ctl := benchServer(b, persisted)
			ctx := context.Background()
			if err := store.New(ctl).Register(ctx, benchJob("benchjob", "http://bench.example/")); err != nil {
				b.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer rdb.Close()
			p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "bench"})
			j, err := p.Take(ctx)
			if err != nil || j == nil {
				b.Fatal(j, err)
			}
			report := embeddedredis.StartCPU()
			for b.Loop() {
				if _, err := j.LogDownload(ctx, "http://bench.example/page", 200); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
	}
}
