package metrics

// Dashboard sign-in and actions (doc/web.md, Signing in and acting).
// Labels come from fixed sets; tokens and codes never appear.
var (
	webRefused = newCounterVec("archivebot_web_refused_total",
		"Dashboard sign-ins and actions refused, by reason (code_unknown, code_used, code_expired, sessions_per_nick, sessions_total, rate_session, rate_address, cross_site, csrf, no_session, account, standby, no_irc, bad_input, off).",
		"reason")
	webSignIns = newCounter("archivebot_web_sign_ins_total",
		"Dashboard sessions made from a sign-in link.")
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
