package web

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauges read from Redis at scrape time. Queue label values are a fixed
// set: pending:NAME queues (names come from users) are summed as
// "pending-named".
var (
	descQueue = prometheus.NewDesc("archivebot_queue_jobs",
		"Jobs waiting, by queue (pending, pending-ao, pending-large, pending-named = all pending:NAME queues).",
		[]string{"queue"}, nil)
	descPaused = prometheus.NewDesc("archivebot_queue_paused_since_seconds",
		"A paused queue (or all): the UNIX time it was paused, by queue and who paused it (doc/protocol.md, Paused queues).",
		[]string{"queue", "by"}, nil)
	descWorking   = prometheus.NewDesc("archivebot_working_jobs", "Jobs in `working` (taken by a pipeline).", nil, nil)
	descOutcome   = prometheus.NewDesc("archivebot_jobs_outcome", "Redis counters jobs_completed, jobs_aborted, jobs_failed.", []string{"outcome"}, nil)
	descPipelines = prometheus.NewDesc("archivebot_pipelines", "Members of `pipelines` (pipelines reporting).", nil, nil)
	descNotices   = prometheus.NewDesc("archivebot_finish_notices_waiting",
		"Finish notices not yet reported (finish_notifications plus the processing list).", nil, nil)
	descRedisUp      = prometheus.NewDesc("archivebot_redis_up", "1 when the scrape could read Redis.", nil, nil)
	descIRCConnected = prometheus.NewDesc("archivebot_irc_connected", "1 while the IRC client is registered on the server (absent in console mode).", nil, nil)
)

// gaugeCollector reads the Redis-backed gauges at scrape time (one call
// of Store.Gauges: the SCAN for pending:* and two pipelines).
type gaugeCollector struct{ s *Server }

func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descPaused, descWorking, descOutcome, descPipelines, descNotices, descRedisUp, descIRCConnected} {
		ch <- d
	}
}

func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.opt.IRCConnected != nil {
		v := 0.0
		if c.s.opt.IRCConnected() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descIRCConnected, prometheus.GaugeValue, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	g, err := c.s.store.Gauges(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descRedisUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descRedisUp, prometheus.GaugeValue, 1)
	var named int64
	for _, n := range g.Status.Named {
		named += n
	}
	for _, q := range []struct {
		name string
		n    int64
	}{{"pending", g.Status.Pending}, {"pending-ao", g.Status.PendingAO}, {"pending-large", g.Status.PendingLarge}, {"pending-named", named}} {
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(q.n), q.name)
	}
	for _, p := range g.Status.Pauses {
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, float64(p.AtUnix), p.Queue, p.By)
	}
	ch <- prometheus.MustNewConstMetric(descWorking, prometheus.GaugeValue, float64(g.Status.Working))
	ch <- prometheus.MustNewConstMetric(descOutcome, prometheus.GaugeValue, float64(g.Status.Completed), "completed")
	ch <- prometheus.MustNewConstMetric(descOutcome, prometheus.GaugeValue, float64(g.Status.Aborted), "aborted")
	ch <- prometheus.MustNewConstMetric(descOutcome, prometheus.GaugeValue, float64(g.Status.Failed), "failed")
	ch <- prometheus.MustNewConstMetric(descPipelines, prometheus.GaugeValue, float64(g.Pipelines))
	ch <- prometheus.MustNewConstMetric(descNotices, prometheus.GaugeValue, float64(g.FinishNotices))
}
