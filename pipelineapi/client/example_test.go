package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// A pipeline takes a job: it asks the node for one, waiting up to
// WaitMS when every queue is empty, and gets the job record and its
// ignore patterns. The node here is a real pipeline API server on an
// in-process Redis (apitest.StartNode); a pipeline is given the node's
// URL and signs with its own key (archivebot pipeline-key add).
func ExampleClient_Take() {
	ctx := context.Background()
	node, err := apitest.StartNode()
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	if _, err := node.Queue(ctx, "http://example.com/"); err != nil { // !a http://example.com/
		log.Fatal(err)
	}
	c, err := node.Key(ctx, "example-pipeline")
	if err != nil {
		log.Fatal(err)
	}

	job, err := c.Take(ctx, wire.TakeRequest{WaitMS: 1000})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("took", job.Fields["url"], "from", job.Queue)
	// Output: took http://example.com/ from pending
}

// While it crawls, the pipeline sends heartbeats, counters and log
// entries in updates; the answer says whether the job's settings changed
// (SettingsAge) or an op asked it to stop (AbortRequested).
func ExampleClient_Update() {
	ctx := context.Background()
	node, err := apitest.StartNode()
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	ident, err := node.Queue(ctx, "http://example.com/")
	if err != nil {
		log.Fatal(err)
	}
	c, err := node.Key(ctx, "example-pipeline")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Take(ctx, wire.TakeRequest{WaitMS: 1000}); err != nil {
		log.Fatal(err)
	}

	entry, _ := json.Marshal(map[string]any{"type": "download", "url": "http://example.com/", "response_code": 200, "is_error": false})
	answer, err := c.Update(ctx, ident, wire.UpdateRequest{
		Heartbeat: 1,
		Incr:      map[string]int64{"bytes_downloaded": 5120, "items_downloaded": 1, "items_queued": 3},
		Log:       []json.RawMessage{entry},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("log entries accepted:", answer.LogAccepted, "abort requested:", answer.AbortRequested)
	// Output: log entries accepted: 1 abort requested: false
}

// When the crawl is over the pipeline says done: the node ends the job,
// and its finish report goes to the channel that queued it.
func ExampleClient_Done() {
	ctx := context.Background()
	node, err := apitest.StartNode()
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	ident, err := node.Queue(ctx, "http://example.com/")
	if err != nil {
		log.Fatal(err)
	}
	c, err := node.Key(ctx, "example-pipeline")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Take(ctx, wire.TakeRequest{WaitMS: 1000}); err != nil {
		log.Fatal(err)
	}

	done, err := c.Done(ctx, ident)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("done:", done.Ident == ident, "aborted:", done.Aborted)
	// Output: done: true aborted: false
}
