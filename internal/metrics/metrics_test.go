package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestServiceCycle(t *testing.T) {
	RegisterService("svc", time.Second)
	t.Cleanup(func() { UnregisterService("svc") })
	failures := testutil.ToFloat64(cycleFailures.WithLabelValues("svc"))
	ServiceCycle("svc", time.Now(), errors.New("boom"))
	s := Services()
	if len(s) != 1 || s[0].Name != "svc" || s[0].LastError != "boom" || !s[0].LastSuccess.IsZero() || s[0].Since.IsZero() {
		t.Fatalf("after a failure: %+v", s)
	}
	if got := testutil.ToFloat64(cycleFailures.WithLabelValues("svc")); got != failures+1 {
		t.Fatalf("failures %v", got)
	}
	ServiceCycle("svc", time.Now(), nil)
	s = Services()
	if s[0].LastError != "" || s[0].LastSuccess.IsZero() {
		t.Fatalf("after a success: %+v", s)
	}
	ServiceCycle("unregistered", time.Now(), nil) // measured, not tracked
	if len(Services()) != 1 {
		t.Fatalf("unregistered service tracked")
	}
}

func TestCounters(t *testing.T) {
	c := func() float64 { return testutil.ToFloat64(commands.WithLabelValues("!a", OutcomeDenied)) }
	before := c()
	CommandHandled("!a", OutcomeDenied)
	if c() != before+1 {
		t.Fatal("command not counted")
	}
	u := testutil.ToFloat64(redisErrors.WithLabelValues("unavailable"))
	RedisError(true)
	if testutil.ToFloat64(redisErrors.WithLabelValues("unavailable")) != u+1 {
		t.Fatal("redis error not counted")
	}
	if n, err := testutil.GatherAndCount(Registry, "archivebot_tweets_total"); err != nil || n != 2 {
		t.Fatalf("tweets series %d %v", n, err)
	}
}
