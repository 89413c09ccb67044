package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dashboard sign-in (doc/web.md, Signing in and acting). Codes and
// session tokens are never stored: keys and ids are their SHA-256, so
// what Redis (or `archivebot sessions list`) shows cannot be replayed.
// These keys are not job state: every node, leader or standby, signs in,
// so the scripts are not fenced.
const (
	// KeyWebCodePrefix + sha256hex(code) (hash, ours): a one-time sign-in
	// code: nick, nick_key, account, account_known, expires_ms, used_ms.
	// It lives WebCodeKeep past its issue, so that a reused or expired
	// code can be told from one never issued.
	KeyWebCodePrefix = "archivebot:web:code:"
	// KeyWebSessionPrefix + id (hash, ours): a session: nick, nick_key,
	// account, account_known, created_ms, expires_ms, csrf; expires with it.
	KeyWebSessionPrefix = "archivebot:web:session:"
	// KeyWebSessions (sorted set, ours): every session id, score = expiry
	// (ms), for the total bound and `archivebot sessions list`.
	KeyWebSessions = "archivebot:web:sessions"
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

// HashSecret is the id under which a code or session token is stored.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// WebSession is a dashboard session as stored.
type WebSession struct {
	ID      string // sha256 of the token
	Nick    string
	NickKey string
	// Account is the services account the nick was logged into when the
	// code was issued; AccountKnown says whether the server told.
	Account      string
	AccountKnown bool
	Created      time.Time
	Expires      time.Time
	CSRF         string
}

// CreateLoginCode stores a sign-in code for nick, valid for ttl (one
// MULTI).
func (s *Store) CreateLoginCode(ctx context.Context, code, nick, nickKey, account string, accountKnown bool, ttl time.Duration) error {
	key := KeyWebCodePrefix + HashSecret(code)
	known := "0"
	if accountKnown {
		known = "1"
	}
	exp := s.Now().Add(ttl).UnixMilli()
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "nick", nick, "nick_key", nickKey, "account", account, "account_known", known, "expires_ms", exp)
		p.PExpire(ctx, key, WebCodeKeep)
		return nil
	})
	return wrap("store sign-in code", err)
}

// Login refusals.
var (
	ErrCodeUnknown = errors.New("this sign-in link was never issued, or was issued long ago")
	ErrCodeUsed    = errors.New("this sign-in link was already used: each link works once")
	ErrCodeExpired = errors.New("this sign-in link expired")
)

// SessionLimitError is a sign-in refused by a bound on sessions.
type SessionLimitError struct {
	PerNick bool // the nick's bound (else the total)
	Limit   int
}

func (e *SessionLimitError) Error() string {
	if e.PerNick {
		return fmt.Sprintf("this nick already has %d dashboard sessions, the most allowed: sign out of one (or use !logout) and try again", e.Limit)
	}
	return fmt.Sprintf("the dashboard already has %d sessions, the most allowed: try again later", e.Limit)
}

// LoginWithCode consumes code and creates a session under token for ttl,
// in one script, within the bounds perNick and total (0: none). Unknown,
// used and expired codes are ErrCode…; a full bound a *SessionLimitError
// (the code stays usable).
func (s *Store) LoginWithCode(ctx context.Context, code, token, csrf string, ttl time.Duration, perNick, total int) (*WebSession, error) {
	codeKey := KeyWebCodePrefix + HashSecret(code)
	nickKey, err := s.rdb.HGet(ctx, codeKey, "nick_key").Result()
	if errors.Is(err, redis.Nil) || (err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")) {
		return nil, ErrCodeUnknown
	}
	if err != nil {
		return nil, wrap("read sign-in code", err)
	}
	id := HashSecret(token)
	now := s.Now().UnixMilli()
	res, err := webLoginScript.Run(ctx, s.rdb, []string{codeKey, KeyWebSessionPrefix + id, KeyWebSessions, KeyWebNickPrefix + nickKey},
		now, ttl.Milliseconds(), perNick, total, csrf, id, nickKey).StringSlice()
	if err != nil {
		return nil, wrap("sign in", err)
	}
	switch res[0] {
	case "unknown":
		return nil, ErrCodeUnknown
	case "used":
		return nil, ErrCodeUsed
	case "expired":
		return nil, ErrCodeExpired
	case "nick_full", "total_full":
		n, _ := strconv.Atoi(res[1])
		return nil, &SessionLimitError{PerNick: res[0] == "nick_full", Limit: n}
	case "ok":
		exp, _ := strconv.ParseInt(res[4], 10, 64)
		return &WebSession{ID: id, Nick: res[1], NickKey: nickKey, Account: res[2], AccountKnown: res[3] == "1",
			Created: time.UnixMilli(now), Expires: time.UnixMilli(exp), CSRF: csrf}, nil
	}
	return nil, fmt.Errorf("sign in: unexpected reply %v", res)
}

// WebSessionByToken returns the live session of token, nil when there is
// none (never issued, expired or ended).
func (s *Store) WebSessionByToken(ctx context.Context, token string) (*WebSession, error) {
	return s.webSession(ctx, HashSecret(token))
}

func (s *Store) webSession(ctx context.Context, id string) (*WebSession, error) {
	m, err := s.rdb.HGetAll(ctx, KeyWebSessionPrefix+id).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("read session", err)
	}
	if m["nick"] == "" {
		return nil, nil
	}
	ms := func(k string) time.Time { v, _ := strconv.ParseInt(m[k], 10, 64); return time.UnixMilli(v) }
	ws := &WebSession{ID: id, Nick: m["nick"], NickKey: m["nick_key"], Account: m["account"], AccountKnown: m["account_known"] == "1",
		Created: ms("created_ms"), Expires: ms("expires_ms"), CSRF: m["csrf"]}
	if !ws.Expires.After(s.Now()) {
		return nil, nil
	}
	return ws, nil
}

// WebSessions lists the live sessions, oldest first.
func (s *Store) WebSessions(ctx context.Context) ([]WebSession, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, KeyWebSessions, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(s.Now().UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, wrap("list sessions", err)
	}
	var out []WebSession
	for _, id := range ids {
		ws, err := s.webSession(ctx, id)
		if err != nil {
			return nil, err
		}
		if ws != nil {
			out = append(out, *ws)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RevokeWebSession ends the session id (one script); false when there
// was none.
func (s *Store) RevokeWebSession(ctx context.Context, id string) (bool, error) {
	ws, err := s.webSession(ctx, id)
	if err != nil || ws == nil {
		return false, err
	}
	n, err := webRevokeScript.Run(ctx, s.rdb, []string{KeyWebSessions, KeyWebNickPrefix + ws.NickKey, KeyWebSessionPrefix + id}, id).Int()
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
	keys := []string{KeyWebSessions, nk}
	args := make([]any, len(ids))
	for i, id := range ids {
		keys = append(keys, KeyWebSessionPrefix+id)
		args[i] = id
	}
	n, err := webRevokeScript.Run(ctx, s.rdb, keys, args...).Int()
	return n, wrap("end sessions", err)
}

// LoginCode is what a sign-in page shows before the code is used.
type LoginCode struct {
	Nick    string
	Expires time.Time
	Used    bool
}

// PeekLoginCode reads code without consuming it: nil when it was never
// issued (or is older than WebCodeKeep).
func (s *Store) PeekLoginCode(ctx context.Context, code string) (*LoginCode, error) {
	v, err := s.rdb.HMGet(ctx, KeyWebCodePrefix+HashSecret(code), "nick", "expires_ms", "used_ms").Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil
		}
		return nil, wrap("read sign-in code", err)
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	if str(0) == "" {
		return nil, nil
	}
	exp, _ := strconv.ParseInt(str(1), 10, 64)
	return &LoginCode{Nick: str(0), Expires: time.UnixMilli(exp), Used: str(2) != ""}, nil
}
