// Package soak is the chaos soak (issue 28, doc/soak.md): a `go test`
// package that starts a whole deployment as real processes (two HA
// nodes, Redis behind Sentinel, ngircd, pipelines of three kinds), drives
// it with IRC users, dashboard viewers and the feed, injects faults on a
// schedule drawn from one seed, records everything in a history
// (soak/history) and hands that history to the checker (soak/check).
//
// Run it with
//
//	SOAK_DURATION=150s SOAK_SEED=1 go test ./soak -run TestSoak -timeout 0 -v
//
// TestSoak skips unless SOAK_DURATION is set.
package soak
