package bot

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/store"
)

// Job defaults (doc/protocol.md, Job record).
const (
	defaultDelayMin    = 250
	defaultDelayMax    = 375
	defaultConcurrency = 3
	// baseSettingsAge counts the changes upstream made while creating a
	// job: delay, concurrency, the global ignore set, report suppression.
	baseSettingsAge = 4
	// MaxURLLen bounds a job URL (browsers and crawlers give up around 8k;
	// IRC lines cannot carry more than about 450 bytes anyway).
	MaxURLLen = 4096
)

// archiveKind says which of the four archive commands is running.
type archiveKind struct {
	shallow bool // !ao: fetch_depth shallow, pending-ao
	list    bool // "<": the URL is a list of URLs
}

// !archive URL [options]          (!a)
// !archive < URL [options]        (!a <)
// !archiveonly URL [options]      (!ao)
// !archiveonly < URL [options]    (!ao <)
func runArchive(kind archiveKind) func(context.Context, *Bot, *Call) error {
	return func(ctx context.Context, b *Bot, c *Call) error {
		return b.archive(ctx, c, kind)
	}
}

func (b *Bot) archive(ctx context.Context, c *Call, kind archiveKind) error {
	words, err := splitWords(c.Rest)
	if err != nil {
		c.Refuse("Sorry, I can't parse that.  The error: %s.", err)
		return nil
	}
	if len(words) == 0 {
		c.Usage()
		return nil
	}
	if len(words[0]) > MaxURLLen {
		c.Refuse("Sorry, that URL is %d bytes long; the limit is %d.", len(words[0]), MaxURLLen)
		return nil
	}
	u, err := ident.Parse(words[0])
	if err != nil || u.Host == "" {
		if s := withScheme(words[0]); s != "" {
			c.Refuse("Sorry, I don't understand the URL you provided. Did you mean %s? (A URL starts with http:// or https://.)", s)
			return nil
		}
		c.Refuse("Sorry, I don't understand the URL you provided.")
		return nil
	}
	if !slices.Contains(b.opts.Schemes, u.Scheme) {
		c.Refuse("Sorry, I can only handle %s.", strings.Join(b.opts.Schemes, ", "))
		return nil
	}
	if err := ident.CheckHost(u); err != nil {
		c.Refuse("Sorry, I won't archive that URL: %s.", strings.TrimPrefix(err.Error(), ident.ErrUnsafeHost.Error()+": "))
		return nil
	}
	opts, err := parseArchiveOptions(words[1:])
	if err != nil {
		c.Refuse("Sorry, I can't parse that.  The error: %s.", err)
		return nil
	}
	if opts.YoutubeDL {
		c.Refuse("Sorry, --youtube-dl is broken at the moment.")
		return nil
	}
	if opts.Large && (opts.Pipeline != "" || kind.shallow) {
		c.Refuse("Sorry, --large has no effect when combined with --pipeline or !ao; the job was not queued. Leave out --large (or --pipeline) and try again.")
		return nil
	}
	url := u.String()
	id := ident.Of(url)
	c.Ident = id

	var userAgent string
	if opts.UserAgentAlias != "" {
		ua, ok := b.opts.Catalog.UserAgent(opts.UserAgentAlias)
		if !ok {
			// Our order says "already exists" wins over a bad alias;
			// this extra lookup happens only on the refusal path.
			exists, err := b.store.Exists(ctx, id)
			if err != nil {
				return err
			}
			if exists {
				return b.replyExists(ctx, c, id, url)
			}
			c.unknownUserAgent(opts.UserAgentAlias)
			return nil
		}
		userAgent = ua
	}

	job := store.NewJob{
		Ident:       id,
		URL:         url,
		URLFile:     kind.list,
		FetchDepth:  "inf",
		StartedBy:   c.Req.Nick,
		StartedIn:   c.Req.Channel,
		UserAgent:   userAgent,
		Note:        opts.Explain,
		DelayMin:    defaultDelayMin,
		DelayMax:    defaultDelayMax,
		Concurrency: defaultConcurrency,
		SettingsAge: baseSettingsAge,
		Queue:       store.KeyPending,
	}
	if kind.shallow {
		job.FetchDepth = "shallow"
		job.Queue = store.KeyPendingAO
	}
	switch {
	case opts.Pipeline != "":
		job.Queue = store.KeyPendingNamed(opts.Pipeline)
	case opts.Large:
		job.Queue = store.KeyPendingLarge
	}
	if u.Scheme == "ftp" {
		job.Concurrency = 1
	}
	job.Slug = u.Host + "-" + job.FetchDepth
	if kind.list {
		job.Slug = "urls-" + u.Host + "-" + path.Base("/"+u.Path) + "-" + job.FetchDepth
	}
	global, _ := b.opts.Catalog.Set("global")
	job.Patterns = append(job.Patterns, global...)
	var known, unknown []string
	var setPatterns int
	for _, name := range opts.IgnoreSets {
		if p, ok := b.opts.Catalog.Set(name); ok {
			known = append(known, name)
			setPatterns += len(p)
			job.Patterns = append(job.Patterns, p...)
		} else {
			unknown = append(unknown, name)
		}
	}
	if len(known) > 0 {
		job.SettingsAge++
	}
	if opts.has("delay") {
		job.DelayMin, job.DelayMax = opts.Delay, opts.Delay
		job.SettingsAge++
	}
	if opts.has("concurrency") {
		job.Concurrency = opts.Concurrency
		job.SettingsAge++
	}
	job.NoOffsiteLinks = opts.NoOffsiteLinks
	// The pending limit binds plain !a from non-operators (upstream counted
	// only the "pending" list). The console user counts as an operator.
	if !kind.shallow && !kind.list && c.Req.Rank < Op {
		job.PendingLimit = b.opts.PendingLimit
	}
	// The per-user limit binds every archive command of a non-operator.
	if c.Req.Rank < Op {
		job.PerUserLimit = b.opts.PerUserPendingLimit
	}
	job.NickKey = c.Req.NickKey
	job.ByOp = c.Req.Rank >= Op
	switch {
	case opts.has("notify-start"):
		job.NotifyStart = true
	case opts.has("no-notify-start"):
	default:
		job.NotifyStart = b.opts.StartNotices && !kind.shallow
	}

	c.Effect = "the job for " + url + " was queued"
	var limited *store.UserLimitError
	switch err := b.store.Register(ctx, job); {
	case errors.Is(err, store.ErrJobExists):
		return b.replyExists(ctx, c, id, url)
	case errors.As(err, &limited):
		c.Refuse("Sorry, you already have %d jobs queued; the limit is %d per person. Wait until some of them have started (or ask a channel operator).",
			limited.Queued, b.opts.PerUserPendingLimit)
		return nil
	case errors.Is(err, store.ErrPendingFull):
		c.Refuse("Sorry, %d jobs are already waiting in the pending queue; only channel operators may queue more until it drains. (!ao still works.)", b.opts.PendingLimit)
		return nil
	case err != nil:
		return err
	}

	what := url
	if kind.list {
		what = "URLs in " + url
	}
	if kind.shallow {
		c.Reply("Queued %s for archival without recursion.", what)
	} else {
		c.Reply("Queued %s.", what)
	}
	if userAgent != "" {
		c.Reply("Using user-agent %s.", userAgent)
	}
	c.Reply("Use !status %s for updates, !abort %s to abort.", id, id)
	if opts.Explain != "" {
		c.Reply("Added note \"%s\" to job %s.", opts.Explain, id)
	}
	if opts.has("delay") {
		c.Reply("Inter-request delay for job %s set to [%d, %d] ms.", id, job.DelayMin, job.DelayMax)
	}
	if opts.has("concurrency") {
		c.Reply("Job %s set to use %s.", id, workers(job.Concurrency))
	}
	switch len(known) {
	case 0:
	case 1:
		c.Reply("Added %d patterns from ignore set %s to job %s.", setPatterns, known[0], id)
	default:
		c.Reply("Added %d patterns from ignore sets {%s} to job %s.", setPatterns, strings.Join(known, ", "), id)
	}
	if len(unknown) > 0 {
		c.Reply("The following sets are unknown: %s", strings.Join(unknown, ", "))
	}
	var notes []string
	if opts.Pipeline != "" {
		notes = append(notes, "pipeline: /"+opts.Pipeline+"/")
	}
	if opts.NoOffsiteLinks {
		notes = append(notes, "offsite links: no")
	}
	if len(notes) > 0 {
		c.Reply("Options: %s", strings.Join(notes, "; "))
	}
	return nil
}

func (b *Bot) replyExists(ctx context.Context, c *Call, id, url string) error {
	c.Refuse("Job for %s already exists.", url)
	job, err := b.store.GetJob(ctx, id)
	if err != nil {
		// What matters was said; the status line is extra.
		b.log.Warn("status of existing job", "ident", id, "err", err)
		return nil
	}
	if job != nil {
		c.Reply("%s", jobStatus(job))
	}
	return nil
}

// workers is "1 worker" or "N workers".
func workers(n int) string { return fmt.Sprintf("%d %s", n, plural(n, "worker", "workers")) }

// bareHost is a host name with an optional port and path, without a
// scheme: "example.com", "example.com:8080/a", "//example.com/".
var bareHost = regexp.MustCompile(`^(?://)?[^/:@?#\s]+\.[^/:@?#\s]+(?::\d+)?(?:[/?#]\S*)?$`)

// withScheme is the URL a user most likely meant by a word without a
// scheme ("example.com": http://example.com), or "" when there is none.
func withScheme(word string) string {
	if !bareHost.MatchString(word) {
		return ""
	}
	s := "http://" + strings.TrimPrefix(word, "//")
	if u, err := ident.Parse(s); err != nil || u.Host == "" {
		return ""
	}
	return s
}
