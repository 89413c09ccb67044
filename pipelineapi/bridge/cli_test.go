package bridge

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// TestInitKey: -init writes a key file only its owner can read, prints
// the public key in the form pipeline-key add takes, refuses to overwrite
// a key, and the file loads back to the same key.
func TestInitKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	var out, errb bytes.Buffer
	if code := Run([]string{"-init", "-key", path, "-name", "vol-1"}, &out, &errb); code != 0 {
		t.Fatalf("-init: %d %s", code, errb.String())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", st.Mode(), err)
	}
	pub, err := wire.ParsePublicKey(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("printed public key %q: %v", out.String(), err)
	}
	if !strings.Contains(errb.String(), "archivebot pipeline-key add vol-1 ed25519:") {
		t.Errorf("-init does not tell what to send the operators: %q", errb.String())
	}
	// Pasted as is on a node run with a configuration file, the line
	// would act on another Redis: say how to name the node's file.
	if !strings.Contains(errb.String(), "-config FILE, or ARCHIVEBOT_CONFIG") {
		t.Errorf("-init does not say the line needs the node's configuration: %q", errb.String())
	}
	k, err := LoadKey(path)
	if err != nil || k.Name != "vol-1" || !k.Priv.Public().(ed25519.PublicKey).Equal(pub) {
		t.Fatalf("LoadKey = %v, %v; want vol-1 with the printed key", k.Name, err)
	}
	before, _ := os.ReadFile(path)
	if code := Run([]string{"-init", "-key", path}, &out, &errb); code == 0 {
		t.Error("-init over an existing key file succeeded")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("-init over an existing key file changed it")
	}
	os.Chmod(path, 0o644)
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others can read loads: %v", err)
	}
	os.Chmod(path, 0o600)
	errb.Reset()
	if code := Run([]string{"-key", path, "-node", "http://127.0.0.1:1", "-listen", "0.0.0.0:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "not a loopback") {
		t.Errorf("serving on a non-loopback address: %d %q", code, errb.String())
	}
	if code := Run([]string{"-key", path}, &out, &errb); code != 2 {
		t.Errorf("serving without -node: %d", code)
	}
}
