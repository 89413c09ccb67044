// Package metrics holds the control node's Prometheus metrics and the
// record of each background service's last successful cycle (which the
// web server's /readyz reads). Call sites elsewhere add one line each
// (CommandHandled, RedisError, ServiceCycle, …); nothing here imports the
// rest of the project.
//
// Label values come only from fixed sets: command names from the command
// table, the outcomes and service names below, never from user input.
package metrics

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry is the registry /metrics serves: these metrics (each
// registered where it is declared), the Go runtime and process
// collectors, and whatever the web server registers at start (the
// Redis-backed gauges).
var Registry = prometheus.NewRegistry()

// Command outcomes (the "outcome" label of archivebot_commands_total).
const (
	OutcomeOK          = "ok"          // the handler ran and did what was asked (or answered what was asked)
	OutcomeRefused     = "refused"     // the handler turned the request down and changed nothing (unknown job, bad value, job exists, limit)
	OutcomeDenied      = "denied"      // rank too low
	OutcomePrivate     = "private"     // a job-changing command in a private message
	OutcomeUsage       = "usage"       // wrong arity or malformed ident
	OutcomeUnavailable = "unavailable" // Redis unreachable: nothing was sent
	OutcomeUnknown     = "unknown"     // sent, but Redis did not answer: the user is told later
	OutcomeError       = "error"       // any other failure
)

var (
	commands = newCounterVec("archivebot_commands_total",
		"Bang commands handled, by command (table name) and outcome.",
		"command", "outcome")
	outboxQueued = newCounter("archivebot_outbox_lines_queued_total",
		"IRC lines put into the outbox.")
	outboxSent = newCounter("archivebot_outbox_lines_sent_total",
		"IRC lines written to the server socket.")
	redisErrors = newCounterVec("archivebot_redis_errors_total",
		`Failed Redis operations: kind="unavailable" (unreachable, timeouts) or "reply" (error replies).`,
		"kind")
	cycleSeconds = newHistogramVec("archivebot_service_cycle_seconds",
		"Duration of one cycle of a background service (reaper, finish-notifier, pipeline-notifier, analyzer-sweep, tweeter).",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		"service")
	cycleFailures = newCounterVec("archivebot_service_cycle_failures_total",
		"Background service cycles that returned an error.",
		"service")
	logEntries = newCounter("archivebot_log_entries_analyzed_total",
		"Job log entries counted by the log analyzer.")
	logOversized = newCounter("archivebot_log_entries_oversized_total",
		"Job log entries larger than the node reads (64 KiB), skipped by the analyzer, the live stream and /logs/recent (read as their size alone).")
	streamSkipped = newCounter("archivebot_stream_skipped_entries_total",
		"Log entries trimmed before the live stream sent them, because it lagged more than http.stream_max_lag.")
	streamDropped = newCounterVec("archivebot_stream_dropped_total",
		`Live stream frames a slow client lost, by what: "entries" (log entries in dropped frames, the client is told) or "clients" (closed because even job events would have been lost).`,
		"what")
	streamClients = newGaugeVec("archivebot_stream_clients",
		`WebSocket clients of the live stream, by protocol: "upstream" or "v2".`,
		"protocol")
	wrongTypeKeys = newCounterVec("archivebot_wrong_type_keys_skipped_total",
		"Reads of a shared key (pipelines, working, a queue, a counter, tweets:done, archivebot:queues, archivebot:finished) that held another type, written by another program; the key read as empty.",
		"key")
	tweets = newCounterVec("archivebot_tweets_total",
		`Tweets by result: "posted" or "failed" (given up after retries).`,
		"result")
	feedPosts = newCounterVec("archivebot_feed_posts_total",
		`Feed posts by network (x, mastodon, bluesky, dryrun) and kind: "post" (one text), "digest" (several texts, when the queue outran the budget) or "summary" (the daily summary).`,
		"network", "kind")
	feedFailures = newCounterVec("archivebot_feed_failures_total",
		`Feed texts a network gave up on, and rate-limit answers, by network and what: "gave_up" or "rate_limited".`,
		"network", "what")
	feedBudgetLeft = newGaugeVec("archivebot_feed_budget_left",
		"Posts a network may still make in its budget window (-1: no budget), as of its last look at the queue.",
		"network")
	feedPending = newGaugeVec("archivebot_feed_pending",
		"Queued texts a network has not posted, carried or given up yet, as of its last look at the queue.",
		"network")
)

// The constructors below make one metric and register it with Registry,
// so that each metric is named, described and registered in one place
// (the var blocks here, in pipelineapi.go and in ha.go).

func register[C prometheus.Collector](c C) C {
	Registry.MustRegister(c)
	return c
}

func newCounter(name, help string) prometheus.Counter {
	return register(prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func newGauge(name, help string) prometheus.Gauge {
	return register(prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

func newGaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func init() {
	register(collectors.NewGoCollector())
	register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that exist from the start, so a scrape before the first event
	// already shows them at zero.
	redisErrors.WithLabelValues("unavailable")
	redisErrors.WithLabelValues("reply")
	tweets.WithLabelValues("posted")
	streamDropped.WithLabelValues("entries")
	streamDropped.WithLabelValues("clients")
	streamClients.WithLabelValues("upstream")
	streamClients.WithLabelValues("v2")
	tweets.WithLabelValues("failed")
}

// CommandHandled counts one command. name must come from the command table.
func CommandHandled(name, outcome string) { commands.WithLabelValues(name, outcome).Inc() }

// OutboxQueued counts lines put into the IRC outbox.
func OutboxQueued(n int) { outboxQueued.Add(float64(n)) }

// OutboxSent counts one line written to the IRC socket.
func OutboxSent() { outboxSent.Inc() }

// RedisError counts a failed Redis operation; unavailable tells an
// unreachable server from an error reply.
func RedisError(unavailable bool) {
	if unavailable {
		redisErrors.WithLabelValues("unavailable").Inc()
	} else {
		redisErrors.WithLabelValues("reply").Inc()
	}
}

// LogEntriesAnalyzed counts log entries the analyzer consumed.
func LogEntriesAnalyzed(n int) { logEntries.Add(float64(n)) }

// LogEntryOversized counts one log entry read as its size alone.
func LogEntryOversized() { logOversized.Inc() }

// WrongTypeKeySkipped counts one read of a shared key that held another
// type; key is a fixed key name (or "pending:NAME").
func WrongTypeKeySkipped(key string) { wrongTypeKeys.WithLabelValues(key).Inc() }

// StreamSkipped counts log entries trimmed before the stream sent them.
func StreamSkipped(n int) { streamSkipped.Add(float64(n)) }

// StreamDroppedEntries counts log entries in frames a slow client lost.
func StreamDroppedEntries(n int) { streamDropped.WithLabelValues("entries").Add(float64(n)) }

// StreamClientClosed counts a client closed because its queue was full of
// job events.
func StreamClientClosed() { streamDropped.WithLabelValues("clients").Inc() }

// StreamClients adds d to the number of stream clients of protocol.
func StreamClients(protocol string, d int) { streamClients.WithLabelValues(protocol).Add(float64(d)) }

// TweetPosted and TweetFailed count the feed's outcomes.
func TweetPosted() { tweets.WithLabelValues("posted").Inc() }

// TweetFailed counts a tweet the tweeter gave up on.
func TweetFailed() { tweets.WithLabelValues("failed").Inc() }

// FeedNetwork makes a network's feed series exist at zero from the start.
func FeedNetwork(network string) {
	for _, k := range []string{"post", "digest", "summary"} {
		feedPosts.WithLabelValues(network, k)
	}
	feedFailures.WithLabelValues(network, "gave_up")
	feedFailures.WithLabelValues(network, "rate_limited")
}

// FeedPosted counts one post of kind ("post", "digest", "summary") on a
// network.
func FeedPosted(network, kind string) { feedPosts.WithLabelValues(network, kind).Inc() }

// FeedFailure counts a give-up ("gave_up") or a rate-limit answer
// ("rate_limited") on a network.
func FeedFailure(network, what string) { feedFailures.WithLabelValues(network, what).Inc() }

// FeedBudget sets a network's budget left (-1: none) and pending texts.
func FeedBudget(network string, left, pending int) {
	feedBudgetLeft.WithLabelValues(network).Set(float64(left))
	feedPending.WithLabelValues(network).Set(float64(pending))
}

// Service is what /readyz knows about one background service.
type Service struct {
	Name     string
	Interval time.Duration
	// Since is when the service was registered (its first cycle may not
	// have run yet).
	Since time.Time
	// LastSuccess is the end of its last successful cycle (zero: none yet).
	LastSuccess time.Time
	// LastError is the error of its last cycle, "" when it succeeded.
	LastError string
}

var (
	svcMu    sync.Mutex
	services = map[string]*Service{}
)

// RegisterService declares a service and its interval, once at start, so
// that readiness can tell a service that never ran from one that is not
// expected. Registering again resets its record.
func RegisterService(name string, interval time.Duration) {
	svcMu.Lock()
	defer svcMu.Unlock()
	services[name] = &Service{Name: name, Interval: interval, Since: time.Now()}
	cycleSeconds.WithLabelValues(name)
	cycleFailures.WithLabelValues(name)
}

// UnregisterService forgets a service (at shutdown, and in tests).
func UnregisterService(name string) {
	svcMu.Lock()
	delete(services, name)
	svcMu.Unlock()
}

// ServiceCycle records one cycle of service name that started at start and
// ended now with err. Call it as
//
//	defer metrics.ServiceCycle(name, time.Now(), &err)
//
// or directly after the cycle.
func ServiceCycle(name string, start time.Time, err error) {
	end := time.Now()
	cycleSeconds.WithLabelValues(name).Observe(end.Sub(start).Seconds())
	if err != nil {
		cycleFailures.WithLabelValues(name).Inc()
	}
	svcMu.Lock()
	defer svcMu.Unlock()
	s := services[name]
	if s == nil {
		return // not registered: measured, but not part of readiness
	}
	if err != nil {
		s.LastError = err.Error()
		return
	}
	s.LastSuccess, s.LastError = end, ""
}

// Services returns a copy of every registered service's record, by name.
func Services() []Service {
	svcMu.Lock()
	defer svcMu.Unlock()
	out := make([]Service, 0, len(services))
	for _, s := range services {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
