package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dashboard sign-in (doc/web.md, Signing in and acting). Codes and
// session tokens are never stored: keys and ids are what the web server
// derives from them with a key Redis never holds (an HMAC), and every code
// and session carries the MAC of its fields under that key, so what Redis
// (or `archivebot sessions list`) shows cannot be replayed, and a record
// written or rewritten by a Redis writer does not verify. The store keeps
// the records; the web server makes and checks the MACs. These keys are
// not job state: every node, leader or standby, signs in, so the scripts
// are not fenced.
const (
	// KeyWebCodePrefix + id (hash, ours): a one-time sign-in code: nick,
	// nick_key, account, account_known, rank, presence, expires_ms, mac,
	// used_ms. It lives WebCodeKeep past its issue, so that a reused or
	// expired code can be told from one never issued.
	KeyWebCodePrefix = "archivebot:web:code:"
	// KeyWebSessionPrefix + id (hash, ours): a session: nick, nick_key,
	// account, account_known, rank, presence, created_ms, expires_ms, mac;
	// expires with it.
	KeyWebSessionPrefix = "archivebot:web:session:"
	// KeyWebSessions (sorted set, ours): every session id, score = expiry
	// (ms), for the total bound and `archivebot sessions list`.
	KeyWebSessions = "archivebot:web:sessions"
	// KeyWebRankless (sorted set, ours): the ids of sessions signed in
	// without a rank, score = expiry (ms), for their own bound.
	KeyWebRankless = "archivebot:web:rankless"
	// KeyWebNickPrefix + nick key (sorted set, ours): one nick's session
	// ids, score = expiry (ms), for the per-nick bound and !logout.
	KeyWebNickPrefix = "archivebot:web:nick:"
)

// WebCodeKeep is how long a sign-in code's record stays after it was
// issued (its validity is shorter), to say "already used" or "expired".
const WebCodeKeep = 10 * time.Minute

var (
	webLoginScript  = plain(lua("web_login"))
	webRevokeScript = plain(lua("web_revoke"))
)

// WebSession is a dashboard session as stored.
type WebSession struct {
	ID      string // the web server's keyed hash of the token
	Nick    string
	NickKey string
	// Account is the services account the nick was logged into when the
	// code was issued; AccountKnown says whether the server told.
	Account      string
	AccountKnown bool
	// Rank is the nick's highest rank in the bot's channels when the code
	// was issued (0: none); Presence names the nick's presence in them
	// then, as the IRC client told it ("" when it was in none).
	Rank     int
	Presence string
	Created  time.Time
	Expires  time.Time
	// MAC is the web server's MAC of the fields above.
	MAC string
}

// LoginCode is a sign-in code as stored.
type LoginCode struct {
	Nick, NickKey, Account string
	AccountKnown           bool
	Rank                   int
	Presence               string
	Expires                time.Time
	MAC                    string
	Used                   bool
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// CreateLoginCode stores the sign-in code c under id (one MULTI).
func (s *Store) CreateLoginCode(ctx context.Context, id string, c LoginCode) error {
	key := KeyWebCodePrefix + id
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "nick", c.Nick, "nick_key", c.NickKey, "account", c.Account, "account_known", bit(c.AccountKnown),
			"rank", c.Rank, "presence", c.Presence, "expires_ms", c.Expires.UnixMilli(), "mac", c.MAC)
		p.PExpire(ctx, key, WebCodeKeep)
		return nil
	})
	return wrap("store sign-in code", err)
}

// Login refusals.
var (
	ErrCodeUnknown = errors.New("this sign-in link was never issued (or is older than 10 minutes)")
	ErrCodeUsed    = errors.New("this sign-in link was already used: each link works once")
	ErrCodeExpired = errors.New("this sign-in link expired: links work for 2 minutes")
)

// SessionLimitError is a sign-in refused by a bound on sessions.
type SessionLimitError struct {
	PerNick  bool // the nick's bound
	Rankless bool // the bound of sessions signed in without rank
	Limit    int
}

func (e *SessionLimitError) Error() string {
	switch {
	case e.PerNick:
		return fmt.Sprintf("this nick already has %d dashboard sessions, the most allowed: sign out of one (or use !logout) and try again", e.Limit)
	case e.Rankless:
		return fmt.Sprintf("the dashboard already has %d sessions of users without a rank in the channel, the most allowed; ask for voice, or try again later", e.Limit)
	}
	return fmt.Sprintf("the dashboard already has %d sessions, the most allowed: try again later", e.Limit)
}

// SessionBounds bound live sessions: per nick, in total, and of those
// signed in without a rank (0: none).
type SessionBounds struct{ PerNick, Total, Rankless int }

// LoginWithCode consumes the code stored under codeID, which must still
// carry codeMAC, and creates ws (its ID, fields, expiry and MAC) in one
// script, within b. A ranked sign-in to a nick at its bound takes the
// place of the nick's oldest rankless session. Unknown (or rewritten),
// used and expired codes are ErrCode…; a full bound a *SessionLimitError
// (the code stays usable). It returns the id of the session evicted ("").
func (s *Store) LoginWithCode(ctx context.Context, codeID, codeMAC string, ws WebSession, b SessionBounds) (string, error) {
	codeKey := KeyWebCodePrefix + codeID
	nk := KeyWebNickPrefix + ws.NickKey
	old := ""
	if ws.Rank > 0 && b.PerNick > 0 {
		// The nick's oldest rankless session, should the nick be full.
		ids, err := s.rdb.ZRange(ctx, nk, 0, -1).Result()
		if err != nil && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return "", wrap("list the nick's sessions", err)
		}
		if len(ids) >= b.PerNick {
			p := s.rdb.Pipeline()
			scores := make([]*redis.FloatCmd, len(ids))
			for i, id := range ids {
				scores[i] = p.ZScore(ctx, KeyWebRankless, id)
			}
			p.Exec(ctx)
			for i, c := range scores {
				if c.Err() == nil {
					old = ids[i]
					break
				}
			}
		}
	}
	now := s.Now().UnixMilli()
	res, err := webLoginScript.Run(ctx, s.rdb, []string{codeKey, KeyWebSessionPrefix + ws.ID, KeyWebSessions, nk, KeyWebRankless, KeyWebSessionPrefix + old},
		now, ws.Expires.UnixMilli(), b.PerNick, b.Total, b.Rankless, ws.ID, codeMAC, ws.Rank, ws.Presence, ws.MAC, old, ws.Created.UnixMilli()).StringSlice()
	if err != nil {
		return "", wrap("sign in", err)
	}
	switch res[0] {
	case "unknown":
		return "", ErrCodeUnknown
	case "used":
		return "", ErrCodeUsed
	case "expired":
		return "", ErrCodeExpired
	case "nick_full", "total_full", "rankless_full":
		n, _ := strconv.Atoi(res[1])
		return "", &SessionLimitError{PerNick: res[0] == "nick_full", Rankless: res[0] == "rankless_full", Limit: n}
	case "ok":
		return res[1], nil
	}
	return "", fmt.Errorf("sign in: unexpected reply %v", res)
}

// WebSession returns the live session id, nil when there is none (never
// issued, expired or ended). Its MAC is the caller's to check.
func (s *Store) WebSession(ctx context.Context, id string) (*WebSession, error) {
	m, err := s.rdb.HGetAll(ctx, KeyWebSessionPrefix+id).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("read session", err)
	}
	return s.decodeSession(id, m), nil
}

func (s *Store) decodeSession(id string, m map[string]string) *WebSession {
	if m["nick"] == "" {
		return nil
	}
	ms := func(k string) time.Time { v, _ := strconv.ParseInt(m[k], 10, 64); return time.UnixMilli(v) }
	rank, _ := strconv.Atoi(m["rank"])
	ws := &WebSession{ID: id, Nick: m["nick"], NickKey: m["nick_key"], Account: m["account"], AccountKnown: m["account_known"] == "1",
		Rank: rank, Presence: m["presence"], Created: ms("created_ms"), Expires: ms("expires_ms"), MAC: m["mac"]}
	if !ws.Expires.After(s.Now()) {
		return nil
	}
	return ws
}

// WebSessions lists the live sessions, oldest first (two round trips).
func (s *Store) WebSessions(ctx context.Context) ([]WebSession, error) {
	return s.sessionsIn(ctx, KeyWebSessions)
}

// NickSessions lists the live sessions of the nick whose key is nickKey,
// oldest first (two round trips).
func (s *Store) NickSessions(ctx context.Context, nickKey string) ([]WebSession, error) {
	return s.sessionsIn(ctx, KeyWebNickPrefix+nickKey)
}

// NickSessionExpiries returns when each live session of the nick whose
// key is nickKey expires, soonest first (one round trip).
func (s *Store) NickSessionExpiries(ctx context.Context, nickKey string) ([]time.Time, error) {
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, KeyWebNickPrefix+nickKey,
		&redis.ZRangeBy{Min: "(" + strconv.FormatInt(s.Now().UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("list the nick's sessions", err)
	}
	out := make([]time.Time, len(zs))
	for i, z := range zs {
		out[i] = time.UnixMilli(int64(z.Score))
	}
	return out, nil
}

func (s *Store) sessionsIn(ctx context.Context, index string) ([]WebSession, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, index, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(s.Now().UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("list sessions", err)
	}
	p := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.HGetAll(ctx, KeyWebSessionPrefix+id)
	}
	if len(ids) > 0 {
		p.Exec(ctx)
	}
	var out []WebSession
	for i, id := range ids {
		m, err := cmds[i].Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				continue
			}
			return nil, wrap("read session", err)
		}
		if ws := s.decodeSession(id, m); ws != nil {
			out = append(out, *ws)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RevokeWebSession ends the session id (one script); false when there
// was none.
func (s *Store) RevokeWebSession(ctx context.Context, id string) (bool, error) {
	ws, err := s.WebSession(ctx, id)
	if err != nil || ws == nil {
		return false, err
	}
	n, err := webRevokeScript.Run(ctx, s.rdb, []string{KeyWebSessions, KeyWebRankless, KeyWebNickPrefix + ws.NickKey, KeyWebSessionPrefix + id}, id).Int()
	return n > 0, wrap("end session", err)
}

// RevokeWebSessionsOf ends every session of the nick whose key is nickKey
// (one script); it returns how many there were.
func (s *Store) RevokeWebSessionsOf(ctx context.Context, nickKey string) (int, error) {
	nk := KeyWebNickPrefix + nickKey
	ids, err := s.rdb.ZRange(ctx, nk, 0, -1).Result()
	if err != nil {
		return 0, wrap("list the nick's sessions", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	keys := []string{KeyWebSessions, KeyWebRankless, nk}
	args := make([]any, len(ids))
	for i, id := range ids {
		keys = append(keys, KeyWebSessionPrefix+id)
		args[i] = id
	}
	n, err := webRevokeScript.Run(ctx, s.rdb, keys, args...).Int()
	return n, wrap("end sessions", err)
}

// PeekLoginCode reads the code stored under id without consuming it: nil
// when it was never issued (or is older than WebCodeKeep). Its MAC is the
// caller's to check.
func (s *Store) PeekLoginCode(ctx context.Context, id string) (*LoginCode, error) {
	m, err := s.rdb.HGetAll(ctx, KeyWebCodePrefix+id).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("read sign-in code", err)
	}
	if m["nick"] == "" {
		return nil, nil
	}
	exp, _ := strconv.ParseInt(m["expires_ms"], 10, 64)
	rank, _ := strconv.Atoi(m["rank"])
	return &LoginCode{Nick: m["nick"], NickKey: m["nick_key"], Account: m["account"], AccountKnown: m["account_known"] == "1",
		Rank: rank, Presence: m["presence"], Expires: time.UnixMilli(exp), MAC: m["mac"], Used: m["used_ms"] != ""}, nil
}
