package store

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A hot standby on IRC (doc/reliability.md): every HA node keeps its own
// IRC connection; the leader records each command it runs from IRC under
// a key both nodes derive from the same IRC line, so that the node taking
// over runs the lines it buffered that no leader ran, and no other.

// KeyIRCRan (string, ours) records that the leader ran the command read
// from the IRC line keyed line: written in the command's own script
// (cmdrecord.lua) or, for a command that writes no record of its own,
// by MarkIRCRan before it answers. It expires with the command's record.
func KeyIRCRan(line string) string { return "archivebot:irc:ran:" + line }

// KeyIRCReady (string, ours) is present while node has a registered IRC
// connection (SetIRCReady); it expires by itself. KeyIRCNodes (set, ours)
// names the nodes that ever said so.
func KeyIRCReady(node string) string { return "archivebot:irc:ready:" + node }

// KeyIRCNodes is the set of nodes that report IRC readiness.
const KeyIRCNodes = "archivebot:irc:nodes"

type ircLineKey struct{}

// WithIRCLine returns a context under which a user command's script
// (runWrite) also records KeyIRCRan(line), in the same step as its change
// and its outcome record.
func WithIRCLine(ctx context.Context, line string) context.Context {
	return context.WithValue(ctx, ircLineKey{}, line)
}

var ircRanScript = fenced(lua("irc_ran"))

// MarkIRCRan records, fenced by the command fence, that the leader runs
// the command of IRC line line, for ttl; fresh is false when it had been
// recorded before (another term ran it: do not answer it again).
func (s *Store) MarkIRCRan(ctx context.Context, line string, ttl time.Duration) (fresh bool, err error) {
	secs := max(int64(ttl/time.Second), 1)
	tok := fenceToken(ctx)
	if tok == "" && s.commandFence != nil {
		tok = s.commandFence()
	}
	n, err := ircRanScript.Script.Run(ctx, s.rdb, []string{KeyIRCRan(line), KeyLeader}, secs, tok).Int64()
	if err != nil {
		return false, wrap("record irc line", err)
	}
	return n == 1, nil
}

// IRCRan reports, for each IRC line key, whether a leader recorded
// running it.
func (s *Store) IRCRan(ctx context.Context, lines []string) ([]bool, error) {
	out := make([]bool, len(lines))
	if len(lines) == 0 {
		return out, nil
	}
	keys := make([]string, len(lines))
	for i, l := range lines {
		keys[i] = KeyIRCRan(l)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, wrap("read irc lines", err)
	}
	for i, v := range vals {
		out[i] = v != nil
	}
	return out, nil
}

// SetIRCReady says, for ttl, that node has a registered IRC connection
// (ready false withdraws it, and takes node out of KeyIRCNodes: node ids
// are by default hostname-pid, new at each restart). Every node writes
// only its own key.
func (s *Store) SetIRCReady(ctx context.Context, node string, ready bool, ttl time.Duration) error {
	if !ready {
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, KeyIRCReady(node))
			p.SRem(ctx, KeyIRCNodes, node)
			return nil
		})
		return wrap("clear irc ready", err)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, KeyIRCNodes, node)
		p.Set(ctx, KeyIRCReady(node), "1", ttl)
		return nil
	})
	return wrap("set irc ready", err)
}

// IRCReadyNodes lists the nodes other than self whose IRC connection is
// registered now (SetIRCReady within its ttl). It takes the others out of
// KeyIRCNodes (a node killed, whose report expired): a node that reports
// again adds itself back (SetIRCReady), so one that refreshed between the
// read and the removal is missing from the set until its next refresh.
func (s *Store) IRCReadyNodes(ctx context.Context, self string) ([]string, error) {
	nodes, err := s.rdb.SMembers(ctx, KeyIRCNodes).Result()
	if err != nil {
		return nil, wrap("read irc nodes", err)
	}
	var others []string
	for _, n := range nodes {
		if n != self {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	keys := make([]string, len(others))
	for i, n := range others {
		keys[i] = KeyIRCReady(n)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, wrap("read irc ready", err)
	}
	var ready, gone []string
	for i, v := range vals {
		if v != nil {
			ready = append(ready, others[i])
		} else {
			gone = append(gone, others[i])
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.SRem(ctx, KeyIRCNodes, gone).Err(); err != nil {
			return nil, wrap("forget irc nodes", err)
		}
	}
	return ready, nil
}
