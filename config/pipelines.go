package config

import "time"

// Defaults of the pipeline API.
const (
	// The pipeline API's per-key limits (doc/pipeline-api.md, Limits).
	DefaultPipelineRate       = 50
	DefaultPipelineLogRate    = 5000
	DefaultPipelineMaxStreams = 4
	// The pipeline API listener's limits (doc/pipeline-api.md, Listener).
	DefaultPipelineMaxConns        = 512
	DefaultPipelineMaxConnsPerAddr = 64
	DefaultPipelineReadTimeout     = 10 * time.Second
	DefaultPipelineIdleTimeout     = 60 * time.Second
	DefaultPipelineWriteTimeout    = 30 * time.Second
	DefaultPipelineMaxWaitingTakes = 8
	// The bytes of request bodies the API holds while it reads and checks
	// them (doc/pipeline-api.md, Listener): in total, per remote address
	// (an IPv6 address by its /64) and per key name. Measured in
	// doc/benchmarks.md (Attacks on the pipeline API): 512 connections
	// from 9 addresses sending 4 MiB bodies cost the node at most 32 MiB
	// of bodies at once, and a legitimate take is answered meanwhile.
	DefaultPipelineBodyBudget        = 32 << 20
	DefaultPipelineBodyBudgetPerAddr = 8 << 20
	DefaultPipelineBodyBudgetPerKey  = 8 << 20
)

// Pipelines configures the pipeline API listener (doc/pipeline-api.md).
// Every limit is per pipeline key; 0 takes the default.
type Pipelines struct {
	// Listen is the API's own address; "" (the default) switches it off.
	Listen string `toml:"listen"`
	// TLSCert and TLSKey are PEM files: both set serves HTTPS, both empty
	// plain HTTP (behind a TLS-terminating proxy).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// Rate is requests per second (default 50), LogRate log entries per
	// second (default 5000), both with a burst of twice as many;
	// MaxStreams the open control streams (default 4).
	Rate       float64 `toml:"rate"`
	LogRate    float64 `toml:"log_rate"`
	MaxStreams int     `toml:"max_streams"`
	// Listener limits; left out: the default, written as 0: off.
	// MaxConns (default 512) and MaxConnsPerAddr (64) cap open
	// connections in total and per remote address; ReadTimeout (10s)
	// bounds reading a request, IdleTimeout (60s) a kept-alive
	// connection without requests, WriteTimeout (30s) each write of an
	// answer or of a control stream event. MaxWaitingTakes (8) caps the
	// long-poll takes waiting per key.
	MaxConns        int      `toml:"max_conns"`
	MaxConnsPerAddr int      `toml:"max_conns_per_addr"`
	ReadTimeout     Duration `toml:"read_timeout"`
	IdleTimeout     Duration `toml:"idle_timeout"`
	WriteTimeout    Duration `toml:"write_timeout"`
	MaxWaitingTakes int      `toml:"max_waiting_takes"`
	// BodyBudget (default 32 MiB), BodyBudgetPerAddr (8 MiB) and
	// BodyBudgetPerKey (8 MiB) bound the bytes of request bodies over
	// 16 KiB held while they are read and checked, in total, per remote
	// address (IPv6 by /64) and per key name; a body that would pass one
	// is refused 503 body_budget before it is read.
	BodyBudget        int `toml:"body_budget"`
	BodyBudgetPerAddr int `toml:"body_budget_per_addr"`
	BodyBudgetPerKey  int `toml:"body_budget_per_key"`
}
