package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrFenced is wrapped by the error of a fenced script that refused to
// write because this node no longer holds the leader lease.
var ErrFenced = errors.New("fenced: not the leader")

// IsFenced reports whether err is a fenced script's refusal.
func IsFenced(err error) bool {
	if errors.Is(err, ErrFenced) {
		return true
	}
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "FENCED")
}

// LeaseHolder is the content of archivebot:leader.
type LeaseHolder struct {
	Value    string    // the whole value: the fencing token fenced scripts compare
	Token    int64     // the term's fencing token
	Node     string    // the holder's node id
	Acquired time.Time // when the holder took it (its clock)
	TTL      time.Duration
}

// parseLease splits "TOKEN NODE ACQUIRED_MS".
func parseLease(v string) LeaseHolder {
	h := LeaseHolder{Value: v}
	f := strings.Fields(v)
	if len(f) == 3 {
		h.Token, _ = strconv.ParseInt(f[0], 10, 64)
		h.Node = f[1]
		if ms, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			h.Acquired = time.UnixMilli(ms)
		}
	}
	return h
}

// AcquireLease takes the leader lease for node for ttl if nobody holds it.
// It returns the holder afterwards and whether that is this call.
func (s *Store) AcquireLease(ctx context.Context, node string, ttl time.Duration) (LeaseHolder, bool, error) {
	res, err := leaseAcquireScript.Run(ctx, s.rdb, []string{KeyLeader, KeyLeaderToken},
		node, ttl.Milliseconds(), s.Now().UnixMilli()).Slice()
	if err != nil {
		return LeaseHolder{}, false, wrap("acquire leader lease", err)
	}
	if len(res) != 2 {
		return LeaseHolder{}, false, fmt.Errorf("acquire leader lease: unexpected reply %v", res)
	}
	won, _ := res[0].(int64)
	v, _ := res[1].(string)
	h := parseLease(v)
	h.TTL = ttl
	return h, won == 1, nil
}

// RenewLease extends the lease whose value is value; false means it is
// not ours any more.
func (s *Store) RenewLease(ctx context.Context, value string, ttl time.Duration) (bool, error) {
	n, err := leaseRenewScript.Run(ctx, s.rdb, []string{KeyLeader}, value, ttl.Milliseconds()).Int()
	if err != nil {
		return false, wrap("renew leader lease", err)
	}
	return n == 1, nil
}

// ReleaseLease deletes the lease if it still holds value.
func (s *Store) ReleaseLease(ctx context.Context, value string) (bool, error) {
	n, err := leaseReleaseScript.Run(ctx, s.rdb, []string{KeyLeader}, value).Int()
	if err != nil {
		return false, wrap("release leader lease", err)
	}
	return n == 1, nil
}

// Leader reads the lease: ok is false when nobody holds it.
func (s *Store) Leader(ctx context.Context) (h LeaseHolder, ok bool, err error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, KeyLeader)
		pttl = p.PTTL(ctx, KeyLeader)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return LeaseHolder{}, false, nil
	}
	if err != nil {
		return LeaseHolder{}, false, wrap("read leader lease", err)
	}
	h = parseLease(get.Val())
	h.TTL = pttl.Val()
	return h, true, nil
}

// ClockOffset is how far this node's clock (s.Now) is ahead of Redis's
// TIME (negative: behind), measured at the middle of the round trip, and
// that round trip: Redis read its clock somewhere within it, so the
// offset is known only within rtt/2 either way.
func (s *Store) ClockOffset(ctx context.Context) (off, rtt time.Duration, err error) {
	sent := time.Now()
	rt, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return 0, 0, wrap("read redis time", err)
	}
	rtt = time.Since(sent)
	return s.Now().Add(-rtt / 2).Sub(rt), rtt, nil
}
