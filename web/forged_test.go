package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// Someone who can write to Redis (a direct-Redis pipeline holds its
// password) cannot act as an op: a session hash written from scratch, and
// a real session whose nick was rewritten to an op's, do not verify
// without web.secret_file's key; the action is refused, nothing changes,
// the channel hears nothing. Redis holds no CSRF token.
func TestForgedSessionsDoNotAct(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		rig := newActionsRig(t, be, "http://node.test/")
		ctx := context.Background()
		rig.p.set("#archivebot", "opal", bot.RankOp)
		// mallory's own session, rankless.
		c, csrf := rig.signIn(t, "mallory")
		for k, v := range be.Dump(t) {
			if strings.Contains(k+" "+fmt.Sprint(v.Value), csrf) {
				t.Errorf("Redis holds the CSRF token under %s", k)
			}
		}

		// A session hash written from scratch, under the SHA-256 of a
		// token of the writer's choosing.
		token := strings.Repeat("f", 43)
		sum := sha256.Sum256([]byte(token))
		exp := time.Now().Add(time.Hour).UnixMilli()
		if err := be.Client.HSet(ctx, "archivebot:web:session:"+hex.EncodeToString(sum[:]), "nick", "opal", "nick_key", "opal",
			"account", "", "account_known", "0", "rank", "2", "presence", "p-opal", "created_ms", time.Now().UnixMilli(),
			"expires_ms", exp, "csrf", "forged-csrf").Err(); err != nil {
			t.Fatal(err)
		}
		forged := &http.Cookie{Name: SessionCookie, Value: token}

		// mallory's real session, its nick rewritten to the op's.
		keys, _ := be.Client.Keys(ctx, "archivebot:web:session:*").Result()
		for _, k := range keys {
			if n, _ := be.Client.HGet(ctx, k, "nick").Result(); n == "mallory" {
				be.Client.HSet(ctx, k, "nick", "opal", "nick_key", "opal", "rank", "2", "presence", "p-opal")
			}
		}

		before := be.Dump(t)
		for _, tc := range []struct {
			name   string
			cookie *http.Cookie
			csrf   string
		}{{"written from scratch", forged, "forged-csrf"}, {"rewritten", c, csrf}} {
			res, b := rig.act(t, "fail", tc.cookie, tc.csrf, url.Values{}, nil)
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(b, "Nothing was changed") {
				t.Errorf("a session %s in Redis: %d %s", tc.name, res.StatusCode, b)
			}
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("forged sessions changed Redis")
		}
		if len(rig.said) != 0 {
			t.Errorf("the channel heard %q", rig.said)
		}
	})
}
