package embeddedredis

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
)

// The snapshot file is JSON:
//
//	{
//	  "version": 1,
//	  "saved_at_ms": 1767225600000,           // unix milliseconds
//	  "aof_gen": 7,                           // first log segment not included
//	  "dbs": [
//	    {"db": 0, "keys": [
//	      {"key": "s", "type": "string", "string": "v", "expire_at_ms": 1767225700000},
//	      {"key": "h", "type": "hash",   "hash": {"field": "value"}},
//	      {"key": "l", "type": "list",   "list": ["head", "tail"]},
//	      {"key": "S", "type": "set",    "set": ["a", "b"]},
//	      {"key": "z", "type": "zset",   "zset": [{"member": "m", "score": "1.5"}]},
//	      {"key": "/w==", "encoding": "base64", "type": "string", "string": "AA=="}
//	    ]}
//	  ]
//	}
//
// expire_at_ms is the absolute expiry time (unix milliseconds), absent for
// keys without a TTL. Scores are strings in Go's shortest round-trip format
// ("inf" and "-inf" included), so no precision is lost. When the key or any
// string of an entry is not valid UTF-8 (which JSON cannot carry), the entry
// has "encoding": "base64" and all its strings (key, value, fields, members;
// not scores) are standard base64.
const snapshotVersion = 1

// numDBs is the number of databases the snapshot covers: 0-15, Redis's
// default.
const numDBs = 16

type snapshotFile struct {
	Version   int   `json:"version"`
	SavedAtMs int64 `json:"saved_at_ms"`
	// AOFGen is the first log segment whose writes the snapshot does not
	// hold (see aof.go); absent in snapshots written before the log
	// existed, which replay every segment.
	AOFGen int64        `json:"aof_gen,omitempty"`
	DBs    []snapshotDB `json:"dbs"`
}

type snapshotDB struct {
	DB   int           `json:"db"`
	Keys []snapshotKey `json:"keys"`
}

type snapshotKey struct {
	Key        string            `json:"key"`
	Type       string            `json:"type"`
	Encoding   string            `json:"encoding,omitempty"`
	ExpireAtMs int64             `json:"expire_at_ms,omitempty"`
	String     *string           `json:"string,omitempty"`
	Hash       map[string]string `json:"hash,omitempty"`
	List       []string          `json:"list,omitempty"`
	Set        []string          `json:"set,omitempty"`
	ZSet       []zsetMember      `json:"zset,omitempty"`
}

type zsetMember struct {
	Member string `json:"member"`
	Score  string `json:"score"`
}

const (
	typeString = "string"
	typeHash   = "hash"
	typeList   = "list"
	typeSet    = "set"
	typeZSet   = "zset"
)

func supportedType(t string) bool {
	switch t {
	case typeString, typeHash, typeList, typeSet, typeZSet:
		return true
	}
	return false
}

func (f *snapshotFile) keyCount() int {
	n := 0
	for _, db := range f.DBs {
		n += len(db.Keys)
	}
	return n
}

// ---------------------------------------------------------------------------
// File

// writeSnapshotFile writes snap to path atomically: to a temporary file in
// the same directory, synced, renamed over path, and the directory synced
// so that the rename itself survives a crash. It returns the file's size.
func writeSnapshotFile(path string, snap *snapshotFile) (int64, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snap); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	done = true
	return cw.n, syncDir(dir)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// removeStaleTemps removes temporary files left by a save that was
// interrupted by a crash.
func removeStaleTemps(path string, log *slog.Logger) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), filepath.Base(path)+".tmp-*"))
	for _, m := range matches {
		if err := os.Remove(m); err == nil {
			log.Info("embedded redis: removed an unfinished snapshot", "file", m)
		}
	}
}

// readSnapshotFile reads and checks the snapshot at path; (nil, nil) when
// there is none.
func readSnapshotFile(path string) (*snapshotFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("embedded redis: snapshot: %w", err)
	}
	defer f.Close()
	corrupt := func(err error) error {
		return fmt.Errorf("embedded redis: snapshot %s is corrupt (move it away to start with an empty data set): %w", path, err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	var snap snapshotFile
	if err := dec.Decode(&snap); err != nil {
		return nil, corrupt(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt(errors.New("trailing data after the snapshot"))
	}
	if snap.Version != snapshotVersion {
		return nil, corrupt(fmt.Errorf("unsupported version %d (want %d)", snap.Version, snapshotVersion))
	}
	seen := map[int]bool{}
	for i := range snap.DBs {
		db := &snap.DBs[i]
		if db.DB < 0 || db.DB >= numDBs || seen[db.DB] {
			return nil, corrupt(fmt.Errorf("bad or repeated database number %d", db.DB))
		}
		seen[db.DB] = true
		keys := make(map[string]bool, len(db.Keys))
		for j := range db.Keys {
			k := &db.Keys[j]
			if err := decodeBinary(k); err != nil {
				return nil, corrupt(fmt.Errorf("db %d key %q: %w", db.DB, k.Key, err))
			}
			if err := checkKey(k); err != nil {
				return nil, corrupt(fmt.Errorf("db %d key %q: %w", db.DB, k.Key, err))
			}
			if keys[k.Key] {
				return nil, corrupt(fmt.Errorf("db %d: key %q appears twice", db.DB, k.Key))
			}
			keys[k.Key] = true
		}
	}
	return &snap, nil
}

// checkKey checks that an entry has a value of its type, and valid scores.
func checkKey(k *snapshotKey) error {
	var ok bool
	switch k.Type {
	case typeString:
		ok = k.String != nil
	case typeHash:
		ok = len(k.Hash) > 0
	case typeList:
		ok = len(k.List) > 0
	case typeSet:
		ok = len(k.Set) > 0
	case typeZSet:
		ok = len(k.ZSet) > 0
		for _, z := range k.ZSet {
			if f, err := strconv.ParseFloat(z.Score, 64); err != nil || math.IsNaN(f) {
				return fmt.Errorf("bad score %q", z.Score)
			}
		}
	default:
		return fmt.Errorf("unknown type %q", k.Type)
	}
	if !ok {
		return fmt.Errorf("no %s value", k.Type)
	}
	return nil
}

type restoreStats struct{ keys, expired int }

// restoreSnapshot loads a checked snapshot into a fresh miniredis that does
// not serve clients yet. Keys whose expiry time is not after now are left
// out; the others get the time remaining as TTL.
func restoreSnapshot(m *miniredis.Miniredis, snap *snapshotFile, now time.Time) (restoreStats, error) {
	var st restoreStats
	nowMs := now.UnixMilli()
	for _, sdb := range snap.DBs {
		db := m.DB(sdb.DB)
		for _, k := range sdb.Keys {
			if k.ExpireAtMs != 0 && k.ExpireAtMs <= nowMs {
				st.expired++
				continue
			}
			var err error
			switch k.Type {
			case typeString:
				err = db.Set(k.Key, *k.String)
			case typeHash:
				fv := make([]string, 0, 2*len(k.Hash))
				for f, v := range k.Hash {
					fv = append(fv, f, v)
				}
				db.HSet(k.Key, fv...)
			case typeList:
				_, err = db.Push(k.Key, k.List...)
			case typeSet:
				_, err = db.SetAdd(k.Key, k.Set...)
			case typeZSet:
				for _, z := range k.ZSet {
					score, _ := strconv.ParseFloat(z.Score, 64) // checked by checkKey
					if _, err = db.ZAdd(k.Key, score, z.Member); err != nil {
						break
					}
				}
			}
			if err != nil {
				return st, fmt.Errorf("db %d key %q: %w", sdb.DB, k.Key, err)
			}
			if k.ExpireAtMs != 0 {
				db.SetTTL(k.Key, time.Duration(k.ExpireAtMs-nowMs)*time.Millisecond)
			}
			st.keys++
		}
	}
	return st, nil
}
