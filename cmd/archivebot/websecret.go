package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/web"
)

// webSecretPath is where the dashboard's key is: web.secret_file, else
// web-secret in the data directory.
func webSecretPath(cfg *config.Config) string {
	if cfg.Web.SecretFile != "" {
		return cfg.Web.SecretFile
	}
	return filepath.Join(cfg.Redis.DataDir, config.WebSecretFile)
}

// loadWebSecret reads the dashboard's key (doc/web.md, What a Redis writer
// can do): the file's bytes, surrounding white space dropped, at least
// web.MinSecretBytes. When web.secret_file is not set and the data
// directory has none, it makes one (64 random hex digits, mode 0600) and
// says so: with ha.enabled, every node must then be given the same file.
func loadWebSecret(cfg *config.Config, log *slog.Logger) ([]byte, error) {
	path := webSecretPath(cfg)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && cfg.Web.SecretFile == "" {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		b = []byte(hex.EncodeToString(raw) + "\n")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("web.secret_file: %w", err)
		}
		// Written whole under another name, then linked into place: a
		// node starting beside this one on the same data directory reads
		// the whole key or none, and the one that links second uses the
		// first's.
		f, err := os.CreateTemp(filepath.Dir(path), ".web-secret-*")
		if err != nil {
			return nil, fmt.Errorf("web.secret_file: making %s: %w", path, err)
		}
		defer os.Remove(f.Name())
		_, werr := f.Write(b)
		if err := errors.Join(werr, f.Chmod(0o600), f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("web.secret_file: writing %s: %w", path, err)
		}
		if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
			return loadWebSecret(cfg, log)
		} else if err != nil {
			return nil, fmt.Errorf("web.secret_file: making %s: %w", path, err)
		}
		args := []any{"file", path}
		if cfg.HA.Enabled {
			args = append(args, "ha", "copy this file to every node and set web.secret_file there, or sessions made on one node are refused on the others")
		}
		log.Warn("made a new key for dashboard sessions", args...)
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if err != nil {
		return nil, fmt.Errorf("web.secret_file: %w", err)
	}
	key := []byte(strings.TrimSpace(string(b)))
	if len(key) < web.MinSecretBytes {
		return nil, fmt.Errorf("web.secret_file: %s holds %d bytes; it needs at least %d (e.g. head -c 32 /dev/urandom | xxd -p -c 64 > %s)", path, len(key), web.MinSecretBytes, path)
	}
	return key, nil
}
