package metrics

// Dashboard sign-in and actions (doc/web.md, Signing in and acting).
// Labels come from fixed sets; tokens and codes never appear.
var (
	webRefused = newCounterVec("archivebot_web_refused_total",
		"Dashboard sign-ins and actions refused, by reason (code_unknown, code_used, code_expired, sessions_per_nick, sessions_total, sessions_rankless, rate_session, rate_address, rate_irc, cross_site, csrf, no_session, account, standby, no_irc, bad_input, off).",
		"reason")
	webSignIns = newCounter("archivebot_web_sign_ins_total",
		"Dashboard sessions made from a sign-in link.")
	webConnRefused = newCounterVec("archivebot_web_connections_refused_total",
		"Connections to the web and stream listeners refused at accept, by the cap they hit (max_conns, max_conns_per_addr).",
		"limit")
	webConns = newGauge("archivebot_web_connections",
		"Connections open on the web and stream listeners (HTTP and WebSocket).")
	streamExpired = newCounter("archivebot_stream_expired_total",
		"Live-stream connections closed at http.stream_max_age (the client reconnects).")
	webActions = newCounterVec("archivebot_web_actions_total",
		"Dashboard actions run as commands (their outcome is in archivebot_commands_total), by action.",
		"action")
)

// WebRefused counts a refused dashboard sign-in or action.
func WebRefused(reason string) { webRefused.WithLabelValues(reason).Inc() }

// WebSignIn counts a session made.
func WebSignIn() { webSignIns.Inc() }

// WebAction counts an action handed to the command table.
func WebAction(action string) { webActions.WithLabelValues(action).Inc() }

// WebConnRefused counts a connection refused at accept by limit.
func WebConnRefused(limit string) { webConnRefused.WithLabelValues(limit).Inc() }

// WebConnections moves the gauge of open web connections by d.
func WebConnections(d int) { webConns.Add(float64(d)) }

// StreamExpired counts a stream closed at its maximum age.
func StreamExpired() { streamExpired.Inc() }
