package coordinator

import "github.com/archiveteam/archivebot-go/news"

// Temporary aliases while web/stream.go and bot/irc still name these words
// through this package; they go once those files are moved (see the file
// splits) and import package news themselves.
type (
	Announcer       = news.Announcer
	FinishReport    = news.FinishReport
	FinishAnnouncer = news.FinishAnnouncer
	JobEvent        = news.JobEvent
	StreamSink      = news.StreamSink
)

var ErrCannotDeliver = news.ErrCannotDeliver
