package pipelineapi

import (
	"context"
	"errors"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// RecheckHolds is asked by the leader after a Redis failover that may
// have lost writes (coordinator.FailoverCheck): for each job held in this
// term whose take lacks says the new master may not have, it reads the
// job again, and releases it when Redis no longer gives it to the key
// (its record gone, or naming another pipeline or none: the take was
// lost and the job is as it was before it). The key's control streams
// are told at once (a released event, reason wire.ReleasedLost), not at
// the pipeline's next write. It returns the idents released, with those
// whose take lacks says was lost and that another path released first
// (a write refused, the control stream's opening: within the last
// minute); outside a term, none.
func (s *Server) RecheckHolds(ctx context.Context, lacks func(store.ReplPos) bool) ([]string, error) {
	s.mu.Lock()
	t := s.term
	s.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	var released []string
	t.mu.Lock()
	var due []*heldJob
	for _, j := range t.jobs {
		if lacks(j.pos) {
			due = append(due, j)
		}
	}
	kept := t.releasedTakes[:0]
	for _, r := range t.releasedTakes {
		switch {
		case time.Since(r.at) > time.Minute:
		case lacks(r.pos):
			released = append(released, r.ident)
		default:
			kept = append(kept, r)
		}
	}
	t.releasedTakes = kept
	t.mu.Unlock()
	for _, j := range due {
		rj, err := s.store.APIReadJob(ctx, j.ident)
		var naj *store.NotAJobError
		if err != nil && !errors.As(err, &naj) {
			return released, err
		}
		if rj != nil && rj.Record.PipelineID.Value == store.APIPipelineKey(j.key) && rj.Record.FinishedAt.Value == "" {
			continue // the new master has the take
		}
		s.log.Error("a Redis failover lost this take: the job is no longer the key's; told its pipeline to let go",
			"key", j.key, "ident", j.ident, "take_replid", j.pos.ID, "take_offset", j.pos.Offset)
		t.release(j, lostTakeReason)
		released = append(released, j.ident)
	}
	return released, nil
}
