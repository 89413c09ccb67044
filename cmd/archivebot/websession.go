package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// webSignIn joins the bot's !login and !logout to the web server, made
// after the bot (doc/web.md, Signing in and acting). Its zero value, or
// one whose server never started, answers that signing in is off.
type webSignIn struct {
	srv atomic.Pointer[web.Server]
	// secret is the key of the sessions (web.secret_file).
	secret []byte
}

// server is the web server once it started (nil before, or when off).
func (w *webSignIn) server() *web.Server { return w.srv.Load() }

func (w *webSignIn) setServer(s *web.Server) { w.srv.Store(s) }

var errSignInOff = errors.New("the web server is off (http.listen is \"\"), so there is nothing to sign in to")

// botHooks are bot.Options.Login and Logout: nil (signing in off) unless
// http.public_url is set.
func (w *webSignIn) botHooks(cfg *config.Config) (func(context.Context, bot.Request) (string, error), func(context.Context, bot.Request) (int, error)) {
	if cfg.HTTP.PublicURL == "" || cfg.HTTP.Listen == "" {
		return nil, nil
	}
	login := func(ctx context.Context, req bot.Request) (string, error) {
		srv := w.server()
		if srv == nil {
			return "", errSignInOff
		}
		return srv.LoginLink(ctx, req)
	}
	logout := func(ctx context.Context, req bot.Request) (int, error) {
		srv := w.server()
		if srv == nil {
			return 0, errSignInOff
		}
		return srv.Logout(ctx, req)
	}
	return login, logout
}

// whoisNote is !whois's sentence about the nick's dashboard sessions.
func (w *webSignIn) whoisNote(ctx context.Context, nick, nickKey string) string {
	srv := w.server()
	if srv == nil {
		return ""
	}
	return srv.WhoisNote(ctx, nick, nickKey)
}

// presenceEnded is the IRC client's OnPresenceEnd: the sessions bound to
// the nick's presence end (web.Server.EndPresence; it never blocks).
func (w *webSignIn) presenceEnded(nickKey string) {
	if srv := w.server(); srv != nil {
		srv.EndPresence(nickKey)
	}
}

// ircView is what the dashboard's actions need of the IRC client.
type ircView interface {
	Connected() bool
	Rank(channel, nick string) bot.Rank
	Account(nick string) (string, bool)
	Presence(nick string) string
	AllowCommand(nick string, privileged bool) bool
	CommandLimits() (plain, privileged int)
	Channels() []string
	Announce(ctx context.Context, channel, text string) error
}

var _ ircView = (*botirc.Client)(nil)

// currentIRC is the IRC client acting now: the single node's, the HA
// leader's of this term; nil on the console, a standby, or between terms.
func currentIRC(fe frontEnd) ircView {
	switch f := fe.(type) {
	case *botirc.Client:
		return f
	case *haFrontEnd:
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.cur == nil {
			return nil
		}
		return f.cur
	}
	return nil
}

// actionOptions switch the dashboard's sign-in and actions on when
// http.public_url is set; nil otherwise. log is the node's logger (its
// warnings carry the node's handler and fields, as the rest of its lines).
func actionOptions(cfg *config.Config, b *bot.Bot, st *store.Store, fe frontEnd, log *slog.Logger, secret []byte) *web.ActionOptions {
	if cfg.HTTP.PublicURL == "" || b == nil {
		return nil
	}
	opt := &web.ActionOptions{
		PublicURL: cfg.HTTP.PublicURL,
		Bot:       b,
		Presence: func() web.Presence {
			if c := currentIRC(fe); c != nil && c.Connected() {
				return c
			}
			return nil
		},
		Say: func(ctx context.Context, channel, text string) error {
			c := currentIRC(fe)
			if c == nil {
				return errors.New("not connected to IRC")
			}
			return c.Announce(ctx, channel, text)
		},
		Channels: func() []string {
			if c := currentIRC(fe); c != nil {
				return c.Channels()
			}
			return nil
		},
		SessionTTL:       cfg.Web.SessionTTL.Duration,
		SessionsPerNick:  cfg.Web.SessionsPerNick,
		SessionsTotal:    cfg.Web.SessionsTotal,
		SessionsRankless: max(cfg.Web.SessionsRankless, 0),
		Secret:           secret,
		ActionsPerMinute: cfg.Web.ActionsPerMinute,
		AddressPerMinute: cfg.Web.AddressPerMinute,
	}
	if r, ok := fe.(interface{ Role() string }); ok {
		// Where this node's dashboard is, for a standby to name when it
		// is the leader (best effort: a standby without it names the
		// leader's node id only).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := st.SetNodeURL(ctx, cfg.HA.NodeID, cfg.HTTP.PublicURL); err != nil {
			log.Warn("could not record this node's dashboard address", "err", err)
		}
		cancel()
		opt.Leader = func() (bool, string) {
			if r.Role() == "leader" {
				return true, ""
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if h, ok, err := st.Leader(ctx); err == nil && ok {
				if u, _ := st.NodeURL(ctx, h.Node); u != "" {
					return false, h.Node + " (" + u + ")"
				}
				return false, h.Node
			}
			return false, ""
		}
	}
	return opt
}
