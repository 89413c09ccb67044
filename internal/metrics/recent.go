package metrics

var recentOmitted = newCounter("archivebot_web_recent_entries_omitted_total",
	"Log entries left out of /logs/recent answers over http.recent_max_bytes.")

// RecentOmitted counts n entries left out of a /logs/recent answer.
func RecentOmitted(n int) { recentOmitted.Add(float64(n)) }
