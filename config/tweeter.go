package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/robfig/cron/v3"
)

// Defaults of the feed (tweeter).
const (
	DefaultTweeterInterval       = 2 * time.Minute
	DefaultTweeterDelay          = 2 * time.Minute
	DefaultTweeterAPI            = "v2"
	DefaultTweeterMaxTries       = 5
	DefaultTweeterRetryBackoff   = 5 * time.Second
	DefaultTweeterMaxBackoff     = 2 * time.Minute
	DefaultTweeterRateLimitPause = 15 * time.Minute
	DefaultTweeterSweepInterval  = time.Minute
	DefaultTweeterPruneInterval  = 24 * time.Hour
	DefaultTweeterRetention      = 30 * 24 * time.Hour
	DefaultTweeterSeenTTL        = 24 * time.Hour
	DefaultTweeterSeenMax        = 10000
	// Posting budgets (posts per window) of the feed's networks: X's free
	// tier (17 posts a day per user), Mastodon's 300 posts per 3 hours per
	// account, and for Bluesky 450 an hour (a post costs 3 points: 1,350 of
	// the 5,000 points an hour, and 10,800 of the 35,000 a day).
	DefaultTweeterBudget               = 17
	DefaultTweeterBudgetWindow         = 24 * time.Hour
	DefaultTweeterMastodonBudget       = 300
	DefaultTweeterMastodonBudgetWindow = 3 * time.Hour
	DefaultTweeterBlueskyBudget        = 450
	DefaultTweeterBlueskyBudgetWindow  = time.Hour
	DefaultTweeterBlueskyService       = "https://bsky.social"
)

// Tweeter configures the "Archiving URL" feed (see doc/protocol.md, Tweets).
type Tweeter struct {
	Interval       Duration `toml:"interval"`
	Delay          Duration `toml:"delay"`
	API            string   `toml:"api"`
	ConsumerKey    string   `toml:"consumer_key"`
	ConsumerSecret string   `toml:"consumer_secret"`
	AccessToken    string   `toml:"access_token"`
	AccessSecret   string   `toml:"access_secret"`
	// Budget is how many posts X may make per BudgetWindow; more queued
	// texts go out in digests (0: no budget).
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
	// DigestSchedule (cron, UTC) is when digests may go out once the queue
	// outruns a budget ("": whenever needed). SummarySchedule (cron, UTC)
	// is when yesterday's summary is posted ("": never).
	DigestSchedule  string `toml:"digest_schedule"`
	SummarySchedule string `toml:"summary_schedule"`
	// Mastodon and Bluesky are the other networks, each off unless
	// configured.
	Mastodon TweeterMastodon `toml:"mastodon"`
	Bluesky  TweeterBluesky  `toml:"bluesky"`
}

// TweeterMastodon configures the Mastodon network of the feed: on when
// server and access_token are set.
type TweeterMastodon struct {
	// Server is the instance's base URL (http:// allowed, for relays).
	Server       string   `toml:"server"`
	AccessToken  string   `toml:"access_token"`
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
}

// On reports whether Mastodon is configured.
func (m TweeterMastodon) On() bool { return m.Server != "" || m.AccessToken != "" }

// TweeterBluesky configures the Bluesky network of the feed: on when
// identifier and app_password are set.
type TweeterBluesky struct {
	// Service is the PDS base URL; default https://bsky.social.
	Service string `toml:"service"`
	// Identifier is the account's handle or DID.
	Identifier   string   `toml:"identifier"`
	AppPassword  string   `toml:"app_password"`
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
}

// On reports whether Bluesky is configured.
func (b TweeterBluesky) On() bool { return b.Identifier != "" || b.AppPassword != "" }

// cronParser reads the feed's schedules: five fields or a descriptor
// (@hourly, @daily…), as robfig/cron's standard parser.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// checkBaseURL checks a network's base URL: http(s), a host, nothing after
// the path.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("must be an http(s) base URL like https://example.social, got %q", RedactURL(raw))
	}
	return nil
}

// TweeterDryRun reports whether no network of the feed is configured (X,
// Mastodon or Bluesky): texts are then only logged.
func (c *Config) TweeterDryRun() bool {
	return c.Tweeter.ConsumerKey == "" && !c.Tweeter.Mastodon.On() && !c.Tweeter.Bluesky.On()
}
