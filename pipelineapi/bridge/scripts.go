package bridge

import (
	"crypto/sha1"
	"encoding/hex"
)

// The three Lua scripts of upstream's pipeline (pipeline/archivebot/control.py:
// MARK_DONE_SCRIPT, MARK_ABORTED_SCRIPT, LOGGER_SCRIPT), recognised by the
// SHA1 of their text, which is what redis-py's register_script sends with
// EVALSHA. The bridge never runs them: it turns each call into the API
// operation with the same effect (doc/pipeline-api.md, The bridge).
const (
	// SHAMarkDone: KEYS ident; ARGV expire_time, log_channel, finished_at,
	// info (JSON), log_key.
	SHAMarkDone = "988576b47e799af8a2e75e51a00270229eff4b4f"
	// SHAMarkAborted: KEYS ident; ARGV log_channel.
	SHAMarkAborted = "1aec4a5b4bd49991a398ee21bd367773b009b300"
	// SHALog: KEYS ident; ARGV message (JSON), log_channel, log_key.
	SHALog = "f6fda5256637da887e5745b23660c71a16a25ed0"
)

// script is what the bridge does for one known script.
type script int

const (
	scriptNone script = iota
	scriptMarkDone
	scriptMarkAborted
	scriptLog
)

func scriptBySHA(sha string) script {
	switch sha {
	case SHAMarkDone:
		return scriptMarkDone
	case SHAMarkAborted:
		return scriptMarkAborted
	case SHALog:
		return scriptLog
	}
	return scriptNone
}

// sha1Hex is the SHA1 Redis names a script by.
func sha1Hex(body []byte) string {
	s := sha1.Sum(body)
	return hex.EncodeToString(s[:])
}

// wantArgs is the number of KEYS and ARGV each script takes.
func (s script) wantArgs() (keys, argv int) {
	switch s {
	case scriptMarkDone:
		return 1, 5
	case scriptMarkAborted:
		return 1, 1
	case scriptLog:
		return 1, 3
	}
	return 0, 0
}

func (s script) String() string {
	switch s {
	case scriptMarkDone:
		return "mark_done"
	case scriptMarkAborted:
		return "mark_aborted"
	case scriptLog:
		return "log"
	}
	return "unknown"
}
