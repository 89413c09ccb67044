package soak

// Network partitions: every node, pipeline and bridge runs under a user
// id of its own (setpriv), and a partition is an nftables rule that drops
// the packets that process's sockets send to the peer's ports
// (doc/soak.md says why this and not namespaces or a proxy).

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Each process's user id: nodes 41001+, pipelines 42000+, bridges 43000+.
const (
	uidNode   = 41001
	uidPipe   = 42000
	uidBridge = 43000
)

// asUser prefixes a command so that it runs as uid (setpriv execs: the
// pid is the program's own, signals reach it).
func asUser(t *testing.T, uid int, bin string, args []string) (string, []string) {
	sp, err := exec.LookPath("setpriv")
	if err != nil || os.Getuid() != 0 {
		return bin, args
	}
	return sp, append([]string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", bin}, args...)
}

// netFaults is an nftables table of the soak's own, with one output chain
// holding the active partitions; it is deleted when the test ends.
type netFaults struct {
	t     *testing.T
	nft   string
	table string
	ok    bool
	// reason says why partitions cannot be made (!ok).
	reason string
	mu     sync.Mutex
}

// why says why a rule could not be made.
func (n *netFaults) why() string {
	if !n.ok {
		return n.reason
	}
	return "nft refused the rule: see the log"
}

func startNetFaults(t *testing.T) *netFaults {
	n := &netFaults{t: t, table: fmt.Sprintf("soak%d", os.Getpid())}
	nft, err := exec.LookPath("nft")
	if err != nil || os.Getuid() != 0 {
		n.reason = fmt.Sprintf("no nft or not root (uid %d)", os.Getuid())
		t.Logf("soak: %s: partitions cannot be made", n.reason)
		return n
	}
	n.nft = nft
	if out, err := exec.Command(nft, "add", "table", "inet", n.table).CombinedOutput(); err != nil {
		n.reason = fmt.Sprintf("nft add table: %v: %s", err, strings.TrimSpace(string(out)))
		t.Logf("soak: %s: partitions cannot be made", n.reason)
		return n
	}
	t.Cleanup(func() { exec.Command(nft, "delete", "table", "inet", n.table).Run() })
	if out, err := exec.Command(nft, "add", "chain", "inet", n.table, "out",
		"{ type filter hook output priority 0 ; policy accept ; }").CombinedOutput(); err != nil {
		n.reason = fmt.Sprintf("nft add chain: %v: %s", err, strings.TrimSpace(string(out)))
		t.Logf("soak: %s: partitions cannot be made", n.reason)
		return n
	}
	n.ok = true
	return n
}

var handleRE = regexp.MustCompile(`# handle (\d+)`)

// cut drops every TCP packet that uid's sockets send to ports; it
// returns the rule's handle for heal, or 0 when it could not.
func (n *netFaults) cut(uid int, ports []int) int { return n.rule(uid, ports, "drop") }

// reset makes every TCP packet uid's sockets send to ports answered
// with a reset: its connections there break at their next write and new
// ones are refused (a server restart, a netsplit), until heal.
func (n *netFaults) reset(uid int, ports []int) int {
	return n.rule(uid, ports, "reject", "with", "tcp", "reset")
}

func (n *netFaults) rule(uid int, ports []int, verdict ...string) int {
	if !n.ok || len(ports) == 0 {
		return 0
	}
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	args := []string{"-e", "-a", "add", "rule", "inet", n.table, "out", "meta", "skuid", strconv.Itoa(uid),
		"tcp", "dport", "{", strings.Join(ps, ", "), "}"}
	args = append(args, verdict...)
	out, err := exec.Command(n.nft, args...).CombinedOutput()
	m := handleRE.FindSubmatch(out)
	if err != nil || m == nil {
		n.t.Logf("soak: nft %s: %v: %s", strings.Join(args, " "), err, out)
		return 0
	}
	h, _ := strconv.Atoi(string(m[1]))
	return h
}

// heal removes the rule cut returned.
func (n *netFaults) heal(h int) {
	if h == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if out, err := exec.Command(n.nft, "delete", "rule", "inet", n.table, "out", "handle", strconv.Itoa(h)).CombinedOutput(); err != nil {
		n.t.Logf("soak: nft delete rule %d: %v: %s", h, err, out)
	}
}
