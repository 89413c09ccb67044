package bot

import (
	"context"
	"errors"
	"strings"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// !reroute IDENT [--avoid PIPELINE]: take a job away from the pipeline
// that appears banned from its site and queue it again at the front, with
// that pipeline (or PIPELINE, a pipeline key name) avoiding the site
// (doc/commands.md; doc/pipeline-api.md, A ban shows itself).
func runReroute(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	avoid := ""
	switch rest := c.Args[1:]; {
	case len(rest) == 0:
	case len(rest) == 1 && strings.HasPrefix(rest[0], "--avoid="):
		avoid = strings.TrimPrefix(rest[0], "--avoid=")
	case len(rest) == 2 && rest[0] == "--avoid":
		avoid = rest[1]
	default:
		c.Usage()
		return nil
	}
	if avoid != "" || len(c.Args) > 1 {
		if !wire.ValidKeyName(avoid) {
			c.Refuse("Sorry, the pipeline after --avoid must be a pipeline key name: letters, digits, '.', '_' and '-', at most %d characters.", wire.MaxKeyName)
			return nil
		}
	}
	r, err := b.store.Reroute(ctx, id, avoid, c.Req.by())
	var direct *store.DirectPipelineError
	var full *store.AvoidFullError
	switch {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
	case errors.Is(err, store.ErrJobFinished):
		c.Refuse("Job %s has already finished; there is nothing to reroute.", id)
	case errors.Is(err, store.ErrAbortRequested):
		c.Refuse("Sorry, job %s is being aborted (an abort was requested); it cannot be rerouted.", id)
	case errors.Is(err, store.ErrNotRunningOrQueued):
		c.Refuse("Sorry, job %s is neither queued nor running.", id)
	case errors.Is(err, store.ErrNoSuchPipelineKey):
		c.Refuse("Sorry, there is no pipeline key called %s.", avoid)
	case errors.Is(err, store.ErrRerouteNothing):
		c.Refuse("Job %s is still queued: no pipeline holds it. Name the pipeline that must avoid its site: !reroute %s --avoid PIPELINE.", id, id)
	case errors.As(err, &direct):
		c.Refuse("Sorry, job %s cannot be rerouted: %v.", id, err)
	case errors.As(err, &full):
		c.Refuse("Sorry, job %s was not rerouted: %v.", id, err)
	case err != nil:
		return err
	default:
		c.Reply("%s", r.Sentence())
	}
	return nil
}
