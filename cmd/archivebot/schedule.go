package main

import (
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/store"
)

// takeRules are the take rule's settings from the configuration
// (doc/pipeline-api.md, The take rule).
func takeRules(cfg *config.Config) store.TakeRules {
	return store.TakeRules{
		PerUserRunning: cfg.Jobs.PerUserRunningLimit,
		OpsExempt:      cfg.Jobs.PerUserRunningOpsExempt,
		ScanLimit:      cfg.Jobs.TakeScanLimit,
	}
}
