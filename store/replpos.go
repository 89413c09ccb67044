package store

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplPos is a place in Redis's replication stream: the replication ID
// of the master that made a write and its master_repl_offset right after
// it. A server holds the write when its history reaches that offset
// under that ID (ReplInfo, Positions.Holds).
type ReplPos struct {
	ID     string
	Offset int64
}

// Zero reports an unknown position.
func (p ReplPos) Zero() bool { return p.ID == "" }

// ReplInfo is what INFO replication says of a server's history. A
// master's offsets are comparable only under its replication ID: a
// replica promoted to master takes a new ID, keeps the old one as ID2
// and the first offset it does not hold of it as SecondOffset, so it
// holds the old master's stream up to SecondOffset-1 (Redis's
// replication docs, "Replication ID explained"; PSYNC accepts the same
// rule).
type ReplInfo struct {
	Role         string // "master" or "slave"
	ID, ID2      string // master_replid, master_replid2 ("" for none)
	Offset       int64  // master_repl_offset
	SecondOffset int64  // second_repl_offset (-1 for none)
}

// ParseReplInfo reads the fields of INFO replication it needs.
func ParseReplInfo(s string) ReplInfo {
	ri := ReplInfo{SecondOffset: -1}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			ri.Role = v
		case "master_replid":
			ri.ID = v
		case "master_replid2":
			if strings.Trim(v, "0") != "" {
				ri.ID2 = v
			}
		case "master_repl_offset":
			ri.Offset, _ = strconv.ParseInt(v, 10, 64)
		case "second_repl_offset":
			ri.SecondOffset, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return ri
}

// Pos is the position the server is at.
func (ri ReplInfo) Pos() ReplPos { return ReplPos{ID: ri.ID, Offset: ri.Offset} }

// Positions remembers where this node's writes landed in the replication
// stream (WithPositions): the last write that WAIT confirmed, and
// what each master seen said of its history (replication ID links), so
// that after a failover the leader can tell whether the new master holds
// them (coordinator's failover check, doc/reliability.md, A failover that
// loses writes). Safe for concurrent use.
type Positions struct {
	mu        sync.Mutex
	confirmed ReplPos
	confOp    string
	confAt    time.Time
	// links: a replication ID → the ID that continued it and the first
	// offset of it not carried over (learned from a master's ID2).
	links map[string]replLink
	// watched is the master's replication ID the leader's failover
	// check saw last (Watched); it outlives leadership terms.
	watched string
}

type replLink struct {
	next string
	cut  int64
}

// maxLinks bounds the replication IDs remembered (one per failover).
const maxLinks = 1000

// NewPositions returns an empty record.
func NewPositions() *Positions { return &Positions{links: map[string]replLink{}} }

// Learn records what a master said of its history.
func (p *Positions) Learn(ri ReplInfo) {
	if ri.Role != "master" || ri.ID2 == "" || ri.ID2 == ri.ID {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.links[ri.ID2]; !ok && len(p.links) >= maxLinks {
		clear(p.links)
	}
	p.links[ri.ID2] = replLink{next: ri.ID, cut: ri.SecondOffset}
}

// Confirmed records a write WAIT confirmed, at pos.
func (p *Positions) Confirmed(pos ReplPos, op string, at time.Time) {
	if pos.Zero() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.confirmed, p.confOp, p.confAt = pos, op, at
}

// Watched records id as the master's replication ID the failover check
// sees now and returns the one it saw before ("" the first time).
func (p *Positions) Watched(id string) (prev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, p.watched = p.watched, id
	return prev
}

// LastConfirmed is the last write WAIT confirmed (zero: none), what it
// was and when.
func (p *Positions) LastConfirmed() (ReplPos, string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.confirmed, p.confOp, p.confAt
}

// Holds says whether the server ri describes holds the write at pos:
// known is false when its history names neither pos's replication ID nor
// one that is known to have continued it (more failovers than this node
// saw). A write is at pos.Offset when the stream up to that offset holds
// it.
func (p *Positions) Holds(ri ReplInfo, pos ReplPos) (holds, known bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, off, cut := pos.ID, pos.Offset, int64(-1)
	for range maxLinks {
		switch id {
		case ri.ID:
			return off <= ri.Offset && (cut < 0 || off < cut), true
		case ri.ID2:
			return off < ri.SecondOffset && (cut < 0 || off < cut), true
		}
		l, ok := p.links[id]
		if !ok {
			return false, false
		}
		if cut < 0 || l.cut < cut {
			cut = l.cut
		}
		id = l.next
	}
	return false, false
}

// WithPositions makes the store note, after each write WAIT confirms and
// each API take, where it landed in the replication stream (an INFO
// replication sent with the write, in the same round trip), into p; nil
// (the default) notes nothing.
func WithPositions(p *Positions) Option { return func(s *Store) { s.positions = p } }

// Positions is the record WithPositions gave (nil: none).
func (s *Store) Positions() *Positions { return s.positions }

// MasterReplication reads INFO replication of the server the store's
// client writes to (the master the sentinels name).
func (s *Store) MasterReplication(ctx context.Context) (ReplInfo, error) {
	v, err := s.rdb.Info(ctx, "replication").Result()
	if err != nil {
		return ReplInfo{}, wrap("read replication info", err)
	}
	ri := ParseReplInfo(v)
	if s.positions != nil {
		s.positions.Learn(ri)
	}
	return ri, nil
}

// noteInfo reads the position an INFO replication sent right after a
// write reports (zero when it failed or came from a replica).
func (s *Store) noteInfo(info *redis.StringCmd) ReplPos {
	if info == nil || info.Err() != nil {
		return ReplPos{}
	}
	ri := ParseReplInfo(info.Val())
	if ri.Role != "master" {
		return ReplPos{}
	}
	s.positions.Learn(ri)
	return ri.Pos()
}

// runNoting runs the fenced script sc as its Run does, and, when
// positions are tracked, with INFO replication behind it in the same
// round trip: the position returned is where its write ended (zero when
// not tracked or unknown). Commands of one connection's read run one
// after the other, so the offset is the script's own; should the two
// arrive in separate reads, another client's writes may lie between,
// and the position is later than the write: a failover check errs
// towards "not held", which the holds' re-check then settles.
func (s *Store) runNoting(ctx context.Context, sc *fencedScript, keys []string, args ...any) (*redis.Cmd, ReplPos) {
	if s.positions == nil {
		return sc.Run(ctx, s.rdb, keys, args...), ReplPos{}
	}
	keys = append(keys[:len(keys):len(keys)], KeyLeader)
	args = append(args[:len(args):len(args)], fenceToken(ctx))
	var cmd *redis.Cmd
	var info *redis.StringCmd
	send := func(eval bool) {
		s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				cmd = sc.Eval(ctx, p, keys, args...)
			} else {
				cmd = sc.EvalSha(ctx, p, keys, args...)
			}
			info = p.Info(ctx, "replication")
			return nil
		})
	}
	send(false)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		send(true)
	}
	if cmd.Err() != nil {
		return cmd, ReplPos{}
	}
	return cmd, s.noteInfo(info)
}

// TakeLost reports whether the master now lacks a write that ended at
// pos: its replication history does not reach it, or does not say (more
// failovers than this node saw). False when positions are not tracked,
// pos is unknown or the master cannot be asked.
func (s *Store) TakeLost(ctx context.Context, pos ReplPos) bool {
	if s.positions == nil || pos.Zero() {
		return false
	}
	ri, err := s.MasterReplication(ctx)
	if err != nil || ri.Role != "master" || ri.ID == pos.ID {
		return false
	}
	holds, known := s.positions.Holds(ri, pos)
	return !known || !holds
}
