package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// runSessions is `archivebot sessions list | revoke ID|NICK`: the
// dashboard's sessions (doc/web.md, Signing in and acting). IDs are the
// keyed hash (HMAC) of the session token, shown shortened; they cannot be used as
// a cookie.
func runSessions(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("sessions", stdout, stderr)
	pos, err := parseInterspersed(a.fs, args)
	if err != nil {
		return flagExit(err)
	}
	switch {
	case len(pos) == 1 && pos[0] == "list":
	case len(pos) == 2 && pos[0] == "revoke":
	default:
		a.failf("needs list, or revoke ID (a prefix of 8 or more of its id) or revoke NICK (all of its sessions)")
		return 2
	}
	if pos[0] == "revoke" {
		return a.session(func(ctx context.Context) int { return revokeSessions(ctx, a, pos[1]) })
	}
	return a.session(func(ctx context.Context) int {
		list, err := a.store.WebSessions(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		if a.json {
			type row struct {
				ID           string `json:"id"`
				Nick         string `json:"nick"`
				Account      string `json:"account,omitempty"`
				AccountKnown bool   `json:"account_known"`
				Created      int64  `json:"created"`
				Expires      int64  `json:"expires"`
			}
			out := make([]row, len(list))
			for i, s := range list {
				out[i] = row{s.ID, s.Nick, s.Account, s.AccountKnown, s.Created.Unix(), s.Expires.Unix()}
			}
			return a.writeJSON(out)
		}
		if len(list) == 0 {
			fmt.Fprintln(a.stdout, "No dashboard sessions.")
			return 0
		}
		tw := a.table()
		fmt.Fprintln(tw, "ID\tNICK\tACCOUNT\tSIGNED IN\tEXPIRES IN")
		now := time.Now()
		for _, s := range list {
			acct := s.Account
			switch {
			case !s.AccountKnown:
				acct = "(not told)"
			case acct == "":
				acct = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID[:16], s.Nick, acct, s.Created.UTC().Format("2006-01-02 15:04 UTC"),
				s.Expires.Sub(now).Round(time.Minute))
		}
		tw.Flush()
		return 0
	})
}

// revokeSessions ends the session whose id starts with what (8 or more
// hex digits), or else every session of the nick what.
func revokeSessions(ctx context.Context, a *adminCmd, what string) int {
	list, err := a.store.WebSessions(ctx)
	if err != nil {
		return a.refusal("", err)
	}
	var match []store.WebSession
	if len(what) >= 8 && strings.Trim(strings.ToLower(what), "0123456789abcdef") == "" {
		for _, s := range list {
			if strings.HasPrefix(s.ID, strings.ToLower(what)) {
				match = append(match, s)
			}
		}
	}
	if len(match) > 1 {
		a.failf("%d sessions have ids starting %s; give more of the id (archivebot sessions list); nothing was done", len(match), what)
		return 1
	}
	if len(match) == 1 {
		if _, err := a.store.RevokeWebSession(ctx, match[0].ID); err != nil {
			return a.refusal("", err)
		}
		fmt.Fprintf(a.stdout, "Session %s of %s ended: its next request is refused.\n", match[0].ID[:16], match[0].Nick)
		return 0
	}
	var keys []string
	for _, s := range list {
		if strings.EqualFold(s.Nick, what) && !contains(keys, s.NickKey) {
			keys = append(keys, s.NickKey)
		}
	}
	if len(keys) == 0 {
		a.failf("no session has an id starting %s or the nick %s; nothing was done (archivebot sessions list shows them)", what, what)
		return 1
	}
	n := 0
	for _, k := range keys {
		m, err := a.store.RevokeWebSessionsOf(ctx, k)
		if err != nil {
			return a.refusal("", err)
		}
		n += m
	}
	fmt.Fprintf(a.stdout, "%d session(s) of %s ended: their next requests are refused.\n", n, what)
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
