package metrics

var badMembers = newGaugeVec("archivebot_bad_members",
	`Members of a shared list or set that are not what its reader expects (keys another program wrote, not jobs), as counted by the reader's last cycle; by list ("working") and reader (start-notifier, analyzer, firehose, firehose-watcher, tweeter, reaper). They are skipped, and logged as one summary line per change.`,
	"list", "reader")

// BadMembers records how many bad members of list reader found in its
// last cycle. list and reader come from fixed sets.
func BadMembers(list, reader string, n int) { badMembers.WithLabelValues(list, reader).Set(float64(n)) }
