// Package bot implements ArchiveBot's commands: one command table, one
// dispatcher that checks permission, place and arity centrally, and
// handlers that know nothing about sockets. The IRC front end (bot/irc), the
// console front end and the tests all drive the same Bot.Handle.
package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Rank is what a user may do in the channel a command came from.
type Rank int

// Ranks, lowest first. A front end maps IRC prefixes to these: op is "@"
// or any prefix ranked above it, voice is "+", "%" or any op rank.
const (
	RankNone Rank = iota
	RankVoice
	RankOp
)

// Perm is the minimum rank a command needs.
type Perm = Rank

// Permissions, named as the command table in doc/commands.md names them.
const (
	Anyone = RankNone
	Voice  = RankVoice
	Op     = RankOp
)

// Request is one line a user typed.
type Request struct {
	Nick string
	// NickKey is Nick folded with the IRC server's CASEMAPPING (the front
	// end knows it); "" means strings.ToLower(Nick).
	NickKey string
	// Channel is where the line was said; "" for a private message.
	Channel string
	// Rank is the user's rank in Channel (ignored in private).
	Rank Rank
	// Account is the services account the nick is logged into, as the
	// front end knows it; "" when not logged in or not known.
	Account string
	Text    string
	// Where is "web" for a dashboard action (doc/web.md, Signing in and
	// acting), "" for a line typed in IRC or on the console. The audit
	// line and the job's history name it.
	Where string
	// Line is the key of the IRC line the command was read from, the same
	// on every node that saw the line (bot/irc: msgid, else derived; see
	// doc/reliability.md, A hot standby on IRC); "" elsewhere. A command
	// that RecordsLine writes it (store.WithIRCLine) in its own script.
	Line string
}

// WhereWeb marks a request made from the dashboard.
const WhereWeb = "web"

// by is who made a change, for the job's history: the nick, and
// " (web)" after it for a dashboard action.
func (r Request) by() string {
	if r.Where == WhereWeb {
		return r.Nick + " (web)"
	}
	return r.Nick
}

// Private reports whether the request came in a private message.
func (r Request) Private() bool { return r.Channel == "" }

// OutcomeReplier is a Replier that learns the outcome of the command it
// answered once Handle is done with it (metrics.Outcome…): the dashboard
// shows a refusal on the page only, and says in the channel only what
// the command did.
type OutcomeReplier interface {
	Replier
	Outcome(outcome string)
}

// Replier delivers a command's answers. Front ends implement it: in a
// channel Reply prefixes "nick: ", in private it sends a private message,
// on the console it prints. Text may contain anything; front ends make it
// safe for their medium.
type Replier interface {
	Reply(text string)
	// Private answers the user privately (!pending).
	Private(text string)
}

// Command is one row of the command table.
type Command struct {
	Name    string
	Aliases []string
	Perm    Perm
	// Mutates marks commands that change jobs: refused in private
	// messages, where there is no channel to judge rank or report to.
	Mutates bool
	// Unrecorded marks a command that Mutates but whose write keeps no
	// outcome record of its own (a fenced script outside the user-command
	// scripts): a hot standby must record its IRC line before it runs it
	// (RecordsLine).
	Unrecorded bool
	// Usage is the syntax shown for malformed calls.
	Usage string
	// Help is a one-line description.
	Help string
	// MinArgs and MaxArgs bound the whitespace-separated arguments;
	// MaxArgs < 0 means no upper bound.
	MinArgs, MaxArgs int
	// Ident requires the first argument to be a job ident.
	Ident bool
	Run   func(ctx context.Context, b *Bot, c *Call) error
}

// Call is one invocation of a command.
type Call struct {
	Req  Request
	Cmd  *Command
	Args []string
	// Rest is the argument text after the command name (and "<"),
	// untrimmed inside, with surrounding whitespace removed.
	Rest string
	Out  Replier
	// Ident is the job a command that made one acted on (!a), for the
	// audit line; commands taking an ident argument need not set it.
	Ident string
	// Effect says what the command does, for a reply when its outcome is
	// unknown ("the job for URL was queued"); handlers set it before their
	// write. Empty means "your COMMAND took effect".
	Effect string
	// outcome is set by Refuse and Usage: the handler turned the request
	// down and changed nothing (metrics, the audit line).
	outcome string
}

// Reply answers where the command came from.
func (c *Call) Reply(format string, a ...any) {
	if len(a) == 0 {
		c.Out.Reply(format)
		return
	}
	c.Out.Reply(fmt.Sprintf(format, a...))
}

// Refuse answers a request the handler turns down, having changed
// nothing: its outcome (archivebot_commands_total, the audit line) is
// "refused", not "ok".
func (c *Call) Refuse(format string, a ...any) {
	c.outcome = metrics.OutcomeRefused
	c.Reply(format, a...)
}

// Usage answers with the command's syntax (outcome "usage").
func (c *Call) Usage() {
	c.outcome = metrics.OutcomeUsage
	c.Reply("Usage: %s", c.Cmd.Usage)
}

// unknownJob answers that there is no record of id.
func (c *Call) unknownJob(id string) {
	c.Refuse("Sorry, I don't know anything about %s.", id)
}

// unknownUserAgent answers a user-agent alias the catalog does not know.
func (c *Call) unknownUserAgent(alias string) {
	c.Refuse("Sorry, I don't know what the user agent \"%s\" is.", alias)
}

// job reads the record of id; when there is none it answers so and
// returns nil, nil.
func (b *Bot) job(ctx context.Context, c *Call, id string) (*record.Job, error) {
	job, err := b.store.GetJob(ctx, id)
	if err == nil && job == nil {
		c.unknownJob(id)
	}
	return job, err
}

var identRE = regexp.MustCompile(`^[0-9a-z]+$`)

// IsIdent reports whether s looks like a job ident.
func IsIdent(s string) bool { return len(s) <= 32 && identRE.MatchString(s) }

// Options configures a Bot.
type Options struct {
	// Schemes are the URL schemes !a accepts.
	Schemes []string
	// PendingLimit: at or above this many entries in "pending", only ops
	// may !a. 0 disables the limit.
	PendingLimit int
	// Catalog holds ignore sets and user agents.
	Catalog *Catalog
	Logger  *slog.Logger
	// PendingShown is how many jobs per queue !pending lists.
	PendingShown int
	// PerUserPendingLimit is how many queued jobs one nick may have;
	// operators are exempt. 0 means no limit.
	PerUserPendingLimit int
	// StartNotices is notifier.start_notices: whether !a jobs get a start
	// notice unless they say --no-notify-start (!ao jobs get one only with
	// --notify-start).
	StartNotices bool
	// RequireAccount (jobs.require_account): commands that change jobs
	// need Request.Account (the console, a local operator, is exempt).
	RequireAccount bool
	// OutcomeWait is how long the bot keeps finding out what happened to
	// a command Redis did not answer (config.DefaultOutcomeWait when 0).
	OutcomeWait time.Duration
	// OutcomePoll is the first pause before checking Redis again after
	// an unknown outcome; later pauses double, up to 5 s. Default 250 ms.
	OutcomePoll time.Duration
	// PublicURL is http.public_url: where people reach the dashboard
	// (!pending links its pending page); "" when not set.
	PublicURL string
	// Login, when set, issues a one-time dashboard sign-in link for the
	// request's nick (!login); nil: signing in is off. Logout ends the
	// nick's dashboard sessions (!logout) and says how many there were.
	Login  func(ctx context.Context, req Request) (link string, err error)
	Logout func(ctx context.Context, req Request) (int, error)
}

// Bot runs commands against the job store.
type Bot struct {
	store Store
	opts  Options
	log   *slog.Logger
	table []*Command
	index map[string]*Command

	// Follow-ups of commands whose outcome is unknown (outcome.go).
	mu     sync.Mutex
	closed bool
	life   context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	whois whoisParts // !whois's sources (whois.go)
}

// New returns a Bot over store.
func New(st Store, opts Options) *Bot {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Catalog == nil {
		opts.Catalog = DefaultCatalog()
	}
	if len(opts.Schemes) == 0 {
		opts.Schemes = []string{"http", "https", "ftp"}
	}
	if opts.PendingShown == 0 {
		opts.PendingShown = 10
	}
	if opts.OutcomeWait <= 0 {
		opts.OutcomeWait = config.DefaultOutcomeWait
	}
	if opts.OutcomePoll <= 0 {
		opts.OutcomePoll = 250 * time.Millisecond
	}
	b := &Bot{store: st, opts: opts, log: opts.Logger, index: map[string]*Command{}}
	b.life, b.cancel = context.WithCancel(context.Background())
	b.table = commandTable()
	for _, c := range b.table {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if _, dup := b.index[n]; dup {
				panic("bot: duplicate command name " + n)
			}
			b.index[n] = c
		}
	}
	return b
}

// Commands returns the command table.
func (b *Bot) Commands() []*Command { return b.table }

// lookup finds the command text names, and the remaining argument text.
func (b *Bot) lookup(text string) (*Command, string) {
	text = strings.TrimRightFunc(text, unicode.IsSpace)
	if !strings.HasPrefix(text, "!") {
		return nil, ""
	}
	// Any white space separates words, as in the argument splitting: a
	// TAB after the command name is a separator, not part of the name.
	name, rest := cutSpace(text)
	// "!a < URL" is its own command (op only): try "NAME <" first.
	if first, after := cutSpace(rest); first == "<" {
		if c, ok := b.index[name+" <"]; ok {
			return c, after
		}
	}
	return b.index[name], rest
}

// cutSpace splits s at its first run of white space: the first word, and
// the rest with leading white space removed.
func cutSpace(s string) (first, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}

// RecordsLine reports whether the command text invokes records its IRC
// line (Request.Line) in the same script as its change: a command that
// changes jobs through a user-command script. For any other command a
// front end that needs the line recorded records it before running it.
func (b *Bot) RecordsLine(text string) bool {
	c, _ := b.lookup(text)
	return c != nil && c.Mutates && !c.Unrecorded
}

// IsCommand reports whether text invokes a command of the table. Ordinary
// chat that merely starts with "!" is not a command.
func (b *Bot) IsCommand(text string) bool {
	c, _ := b.lookup(text)
	return c != nil
}

// Handle runs one request. It never returns an error: every outcome,
// including refusals and backend failures, is answered through out.
func (b *Bot) Handle(ctx context.Context, req Request, out Replier) {
	cmd, rest := b.lookup(req.Text)
	if cmd == nil {
		return
	}
	call := &Call{Req: req, Cmd: cmd, Rest: rest, Args: strings.Fields(rest), Out: out}
	outcome := metrics.OutcomeOK
	defer func() {
		metrics.CommandHandled(cmd.Name, outcome)
		if o, ok := out.(OutcomeReplier); ok {
			o.Outcome(outcome)
		}
	}()
	switch {
	case req.Private() && cmd.Mutates:
		outcome = metrics.OutcomePrivate
		call.Reply("Sorry, %s changes jobs: use it in a channel, where I can check your rank and report back.", cmd.Name)
		return
	case cmd.Mutates && b.opts.RequireAccount && req.Account == "" && req.Channel != ConsoleChannel:
		outcome = metrics.OutcomeDenied
		call.Reply("Sorry, %s changes jobs, and here that needs a services account: log in to one (e.g. /msg NickServ IDENTIFY) and try again.", cmd.Name)
		return
	case !req.Private() && req.Rank < cmd.Perm:
		outcome = metrics.OutcomeDenied
		if cmd.Perm == Op {
			call.Reply("Sorry, only channel operators may use that command.")
		} else {
			call.Reply("Sorry, only channel operators or voiced users may use that command.")
		}
		return
	case len(call.Args) < cmd.MinArgs || (cmd.MaxArgs >= 0 && len(call.Args) > cmd.MaxArgs):
		outcome = metrics.OutcomeUsage
		call.Usage()
		return
	case cmd.Ident && !IsIdent(call.Args[0]):
		outcome = metrics.OutcomeUsage
		call.Usage()
		return
	}
	var id string
	if cmd.Mutates {
		ctx, id = b.withCommandID(ctx)
		if req.Line != "" {
			ctx = store.WithIRCLine(ctx, req.Line)
		}
		rec := &firstReply{Replier: out}
		call.Out = rec
		defer func() { b.audit(call, id, outcome, rec.first) }()
	}
	err := cmd.Run(ctx, b, call)
	if err == nil && call.outcome != "" {
		outcome = call.outcome
	}
	if err != nil {
		outcome = metrics.OutcomeError
		if store.IsOutcomeUnknown(err) {
			outcome = metrics.OutcomeUnknown
			b.outcomeUnknown(call, id, err)
			return
		}
		var naj *store.NotAJobError
		if errors.As(err, &naj) {
			outcome = metrics.OutcomeRefused // answered: the key is not a job
			call.Reply("Sorry, %s is not a job.", naj.Key)
			return
		}
		if store.IsUnavailable(err) {
			outcome = metrics.OutcomeUnavailable
			b.log.Warn("command failed: backend unavailable", "command", cmd.Name, "nick", req.Nick, "err", err)
			call.Reply("Sorry, backend unavailable: Redis cannot be reached right now. Please try again in a minute.")
			return
		}
		b.log.Error("command failed", "command", cmd.Name, "nick", req.Nick, "text", req.Text, "err", err)
		call.Reply("Sorry, something went wrong running that command; the operators can find the details in the log.")
	}
}

// audit writes the one INFO line of an accepted command that changes
// state (doc/operating.md): who, where, which command and job, the
// outcome and the first line of the answer. The arguments and the answer
// are what the channel saw; a password in a URL's user info is hidden.
// Long values are cut by the process log like every other value.
func (b *Bot) audit(c *Call, commandID, outcome, reply string) {
	id := c.Ident
	if id == "" && c.Cmd.Ident && len(c.Args) > 0 {
		id = c.Args[0]
	}
	where, attrs := c.Req.Channel, []any{}
	if c.Req.Where == WhereWeb {
		where, attrs = WhereWeb, []any{"channel", c.Req.Channel}
	}
	b.log.Info("command", append([]any{"nick", c.Req.Nick, "where", where}, append(attrs, "command", c.Cmd.Name,
		"ident", id, "outcome", outcome, "args", hideUserinfo(c.Rest), "reply", hideUserinfo(reply), "command_id", commandID)...)...)
}

// userinfo matches the user info of a URL (scheme://user:password@).
var userinfo = regexp.MustCompile(`(://)[^/@\s]*@`)

// hideUserinfo replaces the user info of URLs in s.
func hideUserinfo(s string) string {
	return userinfo.ReplaceAllString(s, "${1}…@")
}

// firstReply passes replies on and keeps the first one.
type firstReply struct {
	Replier
	first string
}

func (r *firstReply) Reply(text string) {
	if r.first == "" {
		r.first = text
	}
	r.Replier.Reply(text)
}

func (r *firstReply) Private(text string) {
	if r.first == "" {
		r.first = text
	}
	r.Replier.Private(text)
}
