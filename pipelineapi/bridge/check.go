package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// Whoer is the node's GET /v1/pipeline; *client.Client implements it.
type Whoer interface {
	WhoAmI(ctx context.Context) (wire.WhoAmI, error)
}

// skewWarn is the clock difference that is warned about: requests are
// refused past wire.MaxSkew.
const skewWarn = 10 * time.Second

// newKeyGrace is how long an unknown key is asked about again before the
// bridge gives up: the node reads its keys from Redis every 250 ms
// (pipelineapi.DefaultKeyRefresh), so a key added a moment before the
// bridge starts (a script that registers it, then starts the bridge) is
// not known yet on the first ask.
const newKeyGrace = 5 * time.Second

// whoAmI is node.WhoAmI, asked again every 250 ms for newKeyGrace while
// the node answers unknown_key.
func whoAmI(ctx context.Context, node Whoer) (wire.WhoAmI, error) {
	deadline := time.Now().Add(newKeyGrace)
	for {
		who, err := node.WhoAmI(ctx)
		var e *client.Error
		if err == nil || !errors.As(err, &e) || e.Code != "unknown_key" || time.Now().After(deadline) {
			return who, err
		}
		if !retry.Sleep(ctx, 250*time.Millisecond) {
			return who, err
		}
	}
}

// CheckNode asks the node, before the bridge serves, whether it takes
// the key (GET /v1/pipeline). err says plainly what stops the bridge
// from working: the key unknown or revoked, another public key
// registered under its name, the clocks too far apart, or an address
// that is not the node's pipeline API. warn is something to say that
// does not stop it (a node not leading right now, an older node without
// the endpoint, clocks drifting apart).
func CheckNode(ctx context.Context, node Whoer, nodeURL string, k KeyFile) (warn string, err error) {
	now := time.Now()
	who, err := whoAmI(ctx, node)
	if err == nil {
		if who.Key != k.Name {
			return "", fmt.Errorf("the node at %s verified this bridge's requests as key %q, not %q: is a proxy in front of it rewriting them?", nodeURL, who.Key, k.Name)
		}
		if d := time.UnixMilli(who.NodeTime).Sub(now.Add(time.Since(now) / 2)); d > skewWarn || d < -skewWarn {
			return fmt.Sprintf("this machine's clock is %s away from the node's: the node refuses requests past %s; set the clock (NTP)",
				d.Abs().Round(time.Second), wire.MaxSkew), nil
		}
		return "", nil
	}
	add := fmt.Sprintf("archivebot pipeline-key add %s %s", k.Name, k.Public())
	var e *client.Error
	if !errors.As(err, &e) {
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &ne) || errors.As(err, &oe) {
			return "", fmt.Errorf("cannot reach the node at %s: %v\n(-node is the node's pipelines.listen address, as its operators give it; is the node running, and reachable from here?)", nodeURL, err)
		}
		// An answer that is not the API's JSON: a web page, a proxy.
		return "", fmt.Errorf("%s did not answer as the pipeline API does (%v): -node is the node's pipelines.listen address, not its web (http.listen) port", nodeURL, err)
	}
	if !e.FromAPI() {
		return "", fmt.Errorf("%s answered %d %q, not as the pipeline API does: -node is the node's pipelines.listen address, not its web (http.listen) port", nodeURL, e.Status, oneLine(e.Reason))
	}
	switch e.Code {
	case "unknown_key":
		return "", fmt.Errorf("the node at %s does not know key %q. Send its operators this line (they run it on the node):\n  %s", nodeURL, k.Name, add)
	case "revoked_key":
		return "", fmt.Errorf("the node's operators revoked key %q: ask them why; a new key is `archivebot bridge -init -key NEWFILE -name NEWNAME`, and its line goes to them", k.Name)
	case "bad_signature":
		return "", fmt.Errorf("the node has another public key under the name %q than this key file's (%s): the operators registered another key, or this is another key file. Send them this line:\n  %s", k.Name, k.Public(), add)
	case "stale_timestamp":
		return "", fmt.Errorf("this machine's clock is more than %s away from the node's, so the node refuses every request (%s): set the clock (NTP), then start the bridge again", wire.MaxSkew, oneLine(e.Reason))
	case "missing_signature", "malformed_signature":
		return "", fmt.Errorf("the node at %s did not get this bridge's signature headers (%s): a proxy in front of it drops or changes them", nodeURL, oneLine(e.Reason))
	case "bad_method":
		if e.Status == http.StatusMethodNotAllowed {
			return "the node is an older version without GET /v1/pipeline: the key is not checked before serving", nil
		}
	}
	if again, _ := transient(err); again {
		return fmt.Sprintf("the node could not check the key now (%d %s: %s); serving, and every call is retried", e.Status, e.Code, oneLine(e.Reason)), nil
	}
	return "", fmt.Errorf("the node at %s refused the key check: %d %s: %s", nodeURL, e.Status, e.Code, oneLine(e.Reason))
}
