package tweeter

import "github.com/archiveteam/archivebot-go/internal/metrics"

// countTweet counts a post's outcome in the metrics and passes it on.
// A dry run's texts count as posted: they are recorded in tweets:done.
func countTweet(o Outcome, err error) (Outcome, error) {
	switch o {
	case Posted:
		metrics.TweetPosted()
	case GaveUp:
		metrics.TweetFailed()
	}
	return o, err
}
