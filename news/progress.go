package news

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/archiveteam/archivebot-go/record"
)

// Progress is what !status IDENT reports for a running job, from the
// pipeline's counters and the analyzer's.
type Progress struct {
	BytesDownloaded int64
	ItemsDownloaded int64
	ItemsQueued     int64
	Counts          record.LogCounts
	Concurrency     int64
	DelayMin        float64
	DelayMax        float64
}

// JobProgress is the progress of j, from its record.
func JobProgress(j *record.Job) Progress {
	return Progress{
		BytesDownloaded: j.BytesDownloaded,
		ItemsDownloaded: j.ItemsDownloaded,
		ItemsQueued:     j.ItemsQueued,
		Counts:          j.Counts,
		Concurrency:     j.Concurrency.Int,
		DelayMin:        j.DelayMin.Float,
		DelayMax:        j.DelayMax.Float,
	}
}

// String is upstream's in-progress status text: "Downloaded 12.35 MB, 3
// errors, 120 queued. 3 workers, delay: 250.0, 375.0 ms." (queued = items
// queued minus items downloaded; MB = 10^6 bytes).
func (p Progress) String() string {
	mb := float64(p.BytesDownloaded) / 1e6
	return fmt.Sprintf("Downloaded %s MB, %d errors, %d queued. %d workers, delay: %s, %s ms.",
		rubyFloat(mb, 2), p.Counts.Errors, p.ItemsQueued-p.ItemsDownloaded,
		p.Concurrency, rubyFloat(p.DelayMin, -1), rubyFloat(p.DelayMax, -1))
}

// rubyFloat writes f the way Ruby's Float#to_s does after round(digits):
// shortest form, always with a decimal point ("250.0", "1.5", "12.35").
func rubyFloat(f float64, digits int) string {
	if digits >= 0 {
		s := strconv.FormatFloat(f, 'f', digits, 64)
		f, _ = strconv.ParseFloat(s, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
