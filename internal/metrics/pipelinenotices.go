package metrics

var pipelineNoticesHeld = newCounter("archivebot_pipeline_notices_held_total",
	"Version changes of pipelines not announced at once because the pipeline's last version line was less than notifier.pipeline_change_every ago; the next line it gets says how many changes it sums up.")

// PipelineNoticeHeld counts one version change held back by the hourly
// limit.
func PipelineNoticeHeld() { pipelineNoticesHeld.Inc() }
