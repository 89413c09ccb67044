package bridge

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// The key file `archivebot bridge -init` writes (mode 0600):
//
//	# archivebot pipeline key: keep it secret
//	name: NAME
//	private: BASE64 of the 32-byte Ed25519 seed
//	public: ed25519:BASE64
//
// The name is the one the operators register the public key under
// (`archivebot pipeline-key add NAME PUBKEY`); the public line is
// informative (it is derived from the seed when read).

// KeyFile is a pipeline's key as the key file holds it.
type KeyFile struct {
	Name string
	Priv ed25519.PrivateKey
}

// Public is the public key as operators paste it.
func (k KeyFile) Public() string {
	return wire.FormatPublicKey(k.Priv.Public().(ed25519.PublicKey))
}

// InitKey creates a new key pair in path (which must not exist), with
// mode 0600.
func InitKey(path, name string) (KeyFile, error) {
	if !wire.ValidKeyName(name) {
		return KeyFile{}, fmt.Errorf("key name %q: 1 to %d of A-Z a-z 0-9 . _ -, starting with a letter or digit", name, wire.MaxKeyName)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyFile{}, err
	}
	k := KeyFile{Name: name, Priv: priv}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return KeyFile{}, err
	}
	_, err = fmt.Fprintf(f, "# archivebot pipeline key: keep it secret\nname: %s\nprivate: %s\npublic: %s\n",
		name, base64.StdEncoding.EncodeToString(priv.Seed()), k.Public())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return KeyFile{}, err
	}
	return k, nil
}

// LoadKey reads a key file. It refuses one that others can read.
func LoadKey(path string) (KeyFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return KeyFile{}, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return KeyFile{}, fmt.Errorf("%s: mode %04o lets others read the private key; chmod 600 it", path, st.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		return KeyFile{}, err
	}
	defer f.Close()
	var k KeyFile
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return KeyFile{}, fmt.Errorf("%s:%d: want NAME: VALUE", path, n)
		}
		val = strings.TrimSpace(val)
		switch strings.TrimSpace(key) {
		case "name":
			k.Name = val
		case "private":
			seed, err := base64.StdEncoding.Strict().DecodeString(val)
			if err != nil || len(seed) != ed25519.SeedSize {
				return KeyFile{}, fmt.Errorf("%s:%d: private is not base64 of a %d-byte Ed25519 seed", path, n, ed25519.SeedSize)
			}
			k.Priv = ed25519.NewKeyFromSeed(seed)
		case "public":
		default:
			return KeyFile{}, fmt.Errorf("%s:%d: unknown field %q", path, n, key)
		}
	}
	if err := sc.Err(); err != nil {
		return KeyFile{}, err
	}
	if k.Priv == nil {
		return KeyFile{}, fmt.Errorf("%s: no private key", path)
	}
	if !wire.ValidKeyName(k.Name) {
		return KeyFile{}, fmt.Errorf("%s: name %q is not a valid key name", path, k.Name)
	}
	return k, nil
}

// defaultName is the machine's host name cut to a valid key name.
func defaultName() string {
	h, _ := os.Hostname()
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.' && b.Len() > 0:
			b.WriteRune(r)
		}
		if b.Len() == wire.MaxKeyName {
			break
		}
	}
	if b.Len() == 0 || !wire.ValidKeyName(b.String()) {
		return "pipeline"
	}
	return b.String()
}

// Run is `archivebot bridge`:
//
//	archivebot bridge -init -key FILE [-name NAME]
//	archivebot bridge -key FILE -node URL [-listen 127.0.0.1:6379]
//
// It serves until SIGINT or SIGTERM.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	initKey := fs.Bool("init", false, "create a key pair in -key (mode 0600) and print the public key for the operators")
	keyPath := fs.String("key", "", "the pipeline's key file")
	name := fs.String("name", "", "with -init: the key's name, as the operators will register it (default: this host's name)")
	node := fs.String("node", "", "the node's pipeline API address (its pipelines.listen), http:// or https://")
	listen := fs.String("listen", "127.0.0.1:6379", "where the pipeline's REDIS_URL points")
	remote := fs.Bool("allow-remote", false, "allow -listen on an address that is not loopback (anyone who reaches it acts as this pipeline)")
	debug := fs.Bool("debug", false, "log every job taken and finished")
	maxClients := fs.Int("max-clients", DefaultMaxClients, "most connections served at once (a pipeline uses about three per running job); another is refused with Redis's \"max number of clients reached\"")
	maxArg := fs.Int("max-arg", DefaultMaxArg, "longest argument of a command, in bytes (Redis's proto-max-bulk-len); a command's arguments together may have twice this; a longer request is refused and its connection closed")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: archivebot bridge [flags] -key FILE -node URL\n       archivebot bridge -init -key FILE [-name NAME]\n\nServe an unmodified upstream pipeline (REDIS_URL=redis://LISTEN/0) through the node's pipeline API\n(doc/pipeline-api.md, The bridge); -init creates the pipeline's key pair.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "archivebot bridge: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *keyPath == "" {
		fmt.Fprintln(stderr, "archivebot bridge: -key FILE is required")
		return 2
	}
	if *initKey {
		n := *name
		if n == "" {
			n = defaultName()
		}
		k, err := InitKey(*keyPath, n)
		if err != nil {
			fmt.Fprintf(stderr, "archivebot bridge: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, k.Public())
		fmt.Fprintf(stderr, "key %q written to %s (mode 0600). Send the operators this line:\n  archivebot pipeline-key add %s %s\n"+
			"(They run it on the node, with the node's -config FILE, or ARCHIVEBOT_CONFIG set, when the node has a configuration file.)\n",
			k.Name, *keyPath, k.Name, k.Public())
		return 0
	}
	if *node == "" {
		fmt.Fprintln(stderr, "archivebot bridge: -node URL is required (the node's pipelines.listen address)")
		return 2
	}
	k, err := LoadKey(*keyPath)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot bridge: %v\n", err)
		return 1
	}
	if *name != "" && *name != k.Name {
		fmt.Fprintf(stderr, "archivebot bridge: -name %q differs from the key file's name %q\n", *name, k.Name)
		return 2
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot bridge: -listen %q: %v\n", *listen, err)
		return 2
	}
	if ip := net.ParseIP(host); !*remote && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		fmt.Fprintf(stderr, "archivebot bridge: -listen %q is not a loopback address: anyone who reaches it acts as this pipeline (-allow-remote to do it anyway)\n", *listen)
		return 2
	}
	cl, err := client.New(*node, k.Name, k.Priv)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot bridge: %v\n", err)
		return 2
	}
	if *maxClients <= 0 || *maxArg <= 0 {
		fmt.Fprintln(stderr, "archivebot bridge: -max-clients and -max-arg must be positive")
		return 2
	}
	checkCtx, cancelCheck := context.WithTimeout(context.Background(), 15*time.Second)
	warn, err := CheckNode(checkCtx, cl, *node, k)
	cancelCheck()
	if err != nil {
		fmt.Fprintf(stderr, "archivebot bridge: not serving: %v\n", err)
		return 1
	}
	if warn != "" {
		fmt.Fprintf(stderr, "archivebot bridge: warning: %s\n", warn)
	}
	level := slog.LevelWarn
	if *debug {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot bridge: %v\n", err)
		return 1
	}
	b := New(Config{Node: cl, Logger: logger, Limits: Limits{MaxClients: *maxClients, MaxArg: *maxArg}})
	fmt.Fprintf(stdout, "bridge for key %q serving redis://%s/0 through %s\n", k.Name, ln.Addr(), *node)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- b.Serve(ln) }()
	select {
	case <-ctx.Done():
		b.Close()
		<-served
		return 0
	case err := <-served:
		b.Close()
		if err != nil {
			fmt.Fprintf(stderr, "archivebot bridge: %v\n", err)
			return 1
		}
		return 0
	}
}
