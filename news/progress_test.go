package news

import (
	"testing"

	"github.com/archiveteam/archivebot-go/record"
)

// TestJobProgress: the in-progress part of !status IDENT, in upstream's
// words and number formats.
func TestJobProgress(t *testing.T) {
	tests := []struct {
		fields map[string]string
		want   string
	}{
		{map[string]string{}, "Downloaded 0.0 MB, 0 errors, 0 queued. 0 workers, delay: 0.0, 0.0 ms."},
		{map[string]string{"bytes_downloaded": "12345678", "error_count": "3", "items_queued": "130",
			"items_downloaded": "10", "concurrency": "3", "delay_min": "250", "delay_max": "375"},
			"Downloaded 12.35 MB, 3 errors, 120 queued. 3 workers, delay: 250.0, 375.0 ms."},
		{map[string]string{"bytes_downloaded": "1500000", "delay_min": "0.5", "delay_max": "1e3"},
			"Downloaded 1.5 MB, 0 errors, 0 queued. 0 workers, delay: 0.5, 1000.0 ms."},
	}
	for _, tc := range tests {
		if got := JobProgress(record.DecodeJob("", tc.fields)).String(); got != tc.want {
			t.Errorf("%v:\n got %q\nwant %q", tc.fields, got, tc.want)
		}
	}
}
