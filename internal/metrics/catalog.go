package metrics

var catalogRefused = newCounterVec("archivebot_catalog_refused_total",
	"What a load of the ignore sets and user agents (jobs.ignore_sets_dir, jobs.user_agents_dir) refused, each load counting again: kind=pattern (left out of its set), agent (left out of its file), file (left out whole). Each is named in a WARN line.",
	"kind")

// CatalogRefused counts one pattern, agent or file a catalog load refused.
func CatalogRefused(kind string) { catalogRefused.WithLabelValues(kind).Inc() }
