package web

// The dashboard's secret (doc/web.md, What a Redis writer can do): ids of
// codes and sessions, their MACs and the CSRF tokens are HMAC-SHA256 under
// a key that is never in Redis (web.secret_file, shared by the nodes of
// one deployment). A code or session hash written or rewritten in Redis
// does not verify; a CSRF token is derived from the session's token, so
// Redis holds none.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/archiveteam/archivebot-go/store"
)

// MinSecretBytes is the least key length accepted.
const MinSecretBytes = 32

// sessionKey computes the dashboard's keyed hashes.
type sessionKey []byte

// newSessionKey returns secret, or a random key of this process when it
// is empty (tests; the node always passes its file's).
func newSessionKey(secret []byte) sessionKey {
	if len(secret) > 0 {
		return sessionKey(secret)
	}
	b := make([]byte, MinSecretBytes)
	rand.Read(b)
	return b
}

func (k sessionKey) sum(parts ...string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// id is where a code's or token's record is stored (kind "code" or
// "session"): it cannot be computed from what Redis shows.
func (k sessionKey) id(kind, secret string) string {
	return hex.EncodeToString(k.sum("id", kind, secret))
}

// csrf is a session's CSRF token, derived from its token.
func (k sessionKey) csrf(token string) string {
	return base64.RawURLEncoding.EncodeToString(k.sum("csrf", token))
}

func ms(t interface{ UnixMilli() int64 }) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// codeMAC is the MAC of a code's fields under its id.
func (k sessionKey) codeMAC(id string, c store.LoginCode) string {
	return hex.EncodeToString(k.sum("code", id, c.Nick, c.NickKey, c.Account, strconv.FormatBool(c.AccountKnown),
		strconv.Itoa(c.Rank), c.Presence, ms(c.Expires)))
}

// sessionMAC is the MAC of a session's fields under its id.
func (k sessionKey) sessionMAC(ws store.WebSession) string {
	return hex.EncodeToString(k.sum("session", ws.ID, ws.Nick, ws.NickKey, ws.Account, strconv.FormatBool(ws.AccountKnown),
		strconv.Itoa(ws.Rank), ws.Presence, ms(ws.Created), ms(ws.Expires)))
}

func macOK(got, want string) bool { return hmac.Equal([]byte(got), []byte(want)) }
