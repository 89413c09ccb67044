package embeddedredis

// The write-ahead log ("append-only file", as Redis calls it) that makes
// the embedded server durable between two snapshots.
//
// Every command that changes data is appended to the log in the order the
// server runs it, before its reply is sent. A background loop writes and
// fsyncs the log every second (Redis's "appendfsync everysec"), so a
// client that does nothing more loses at most about a second of writes on
// a crash. Sync makes everything logged so far durable at once; the control
// node calls it (through SyncHook) before it answers a user, so whatever
// it acknowledged survives kill -9.
//
// Files, in DataDir:
//
//	redis.json       the snapshot; its "aof_gen" is the first log segment
//	                 it does not contain
//	redis.aof.GEN    log segments, GEN a decimal number
//
// A snapshot closes the current segment and opens the next one while no
// write runs, captures the data, writes the snapshot naming the new segment
// and then deletes the older ones; a crash at any point leaves either the
// old snapshot and all segments after it, or the new one and the segments
// it names. Start restores the snapshot, replays the segments from its
// aof_gen on, and (if it replayed anything) writes a snapshot at once.
//
// Record format: a 4-byte little-endian payload length, the payload's
// CRC-32C (4 bytes, little-endian), the payload. Payload: varint time of
// the command (unix ms), uvarint database, one byte (1 = MULTI/EXEC
// group), uvarint number of commands, and per command a uvarint argument
// count and the arguments as uvarint length + bytes. A record holds at
// least one command.
//
// Damage: a record cut short, or whose length, checksum or payload is
// wrong, is told apart by what follows it. If no intact record follows
// (a search of every later byte offset for a length that fits, a matching
// checksum and a payload that decodes), it is a torn tail: the process
// died while writing it, and those writes were never acknowledged. The
// replay of the segment ends there, with a warning, and once the snapshot
// written after the replay holds what was replayed, the segment is renamed
// redis.aof.GEN.torn (kept as evidence, never replayed again) instead of
// deleted. If an intact record follows, the damage is before the tail:
// writes after it may have been acknowledged, so Start fails with
// ErrLogDamaged naming the file and the byte offsets, and deletes and
// writes nothing. Damage to the last record itself cannot be told from a
// torn write. (Before, any damage ended the replay and the segment was
// deleted; the format did not change.)
//
// What is logged, and how (per client connection, the hook follows SELECT
// and MULTI/EXEC):
//
//   - Writes as run, with relative expiries made absolute (EXPIRE and
//     PEXPIRE become PEXPIREAT, SETEX/PSETEX and SET/GETEX with EX/PX use
//     PXAT), so a replay does not restart a 48 h TTL. Scripts are logged as
//     EVAL with their body (EVALSHA is looked up in the bodies seen through
//     EVAL and SCRIPT LOAD); expiries a script sets are made absolute at
//     replay, from the record's time.
//   - A MULTI/EXEC as one record, only when EXEC ran it (not after DISCARD,
//     a failed WATCH or EXECABORT).
//   - SPOP as the SREM of what it popped.
//   - Not logged: replies that are errors (except from scripts, which may
//     have written before failing), commands from connections that have not
//     authenticated, PUBLISH and other commands that change no data,
//     stream and HyperLogLog commands (the snapshot does not store those
//     types either), and blocking pops (BLPOP and the like, outside
//     MULTI): a job popped that way comes back after a crash, which is a
//     duplicate rather than a loss; ArchiveBot's pipelines do not use them.
//     Randomness and TIME inside scripts are not replayed as they were.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// (miniredis is the patched copy in third_party/miniredis, see its
// PATCHES.md.)

// AOFPrefix starts the names of the log segments in Options.DataDir.
const AOFPrefix = "redis.aof."

// aofSyncInterval is how often the log is written and fsynced in the
// background.
const aofSyncInterval = time.Second

// maxRecord bounds a record's payload, so that a corrupt length is not
// taken for a huge record.
const maxRecord = 1 << 30

// msgLoading is the reply to clients while the log is being replayed.
const msgLoading = "LOADING Redis is loading the dataset in memory"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ---------------------------------------------------------------------------
// Records

type aofRecord struct {
	timeMs int64
	db     int
	multi  bool
	cmds   [][]string
}

func (r *aofRecord) appendTo(out []byte) []byte {
	start := len(out)
	out = append(out, 0, 0, 0, 0, 0, 0, 0, 0)
	out = binary.AppendVarint(out, r.timeMs)
	out = binary.AppendUvarint(out, uint64(r.db))
	if r.multi {
		out = append(out, 1)
	} else {
		out = append(out, 0)
	}
	out = binary.AppendUvarint(out, uint64(len(r.cmds)))
	for _, c := range r.cmds {
		out = binary.AppendUvarint(out, uint64(len(c)))
		for _, a := range c {
			out = binary.AppendUvarint(out, uint64(len(a)))
			out = append(out, a...)
		}
	}
	payload := out[start+8:]
	binary.LittleEndian.PutUint32(out[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[start+4:], crc32.Checksum(payload, crcTable))
	return out
}

var errTorn = errors.New("incomplete or damaged record")

// readRecord reads the next record; io.EOF at a clean end, errTorn (wrapped)
// for a record cut short or damaged.
func readRecord(r *bufio.Reader) (*aofRecord, int, error) {
	var h [8]byte
	n, err := io.ReadFull(r, h[:])
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, n, fmt.Errorf("%w: header: %v", errTorn, err)
	}
	size := binary.LittleEndian.Uint32(h[:])
	if size > maxRecord {
		return nil, n, fmt.Errorf("%w: length %d", errTorn, size)
	}
	payload := make([]byte, size)
	m, err := io.ReadFull(r, payload)
	n += m
	if err != nil {
		return nil, n, fmt.Errorf("%w: payload: %v", errTorn, err)
	}
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, n, fmt.Errorf("%w: checksum", errTorn)
	}
	rec, err := decodePayload(payload)
	if err != nil {
		return nil, n, fmt.Errorf("%w: %v", errTorn, err)
	}
	return rec, n, nil
}

func decodePayload(p []byte) (*aofRecord, error) {
	bad := errors.New("bad payload")
	uv := func() uint64 {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			panic(bad)
		}
		p = p[k:]
		return v
	}
	var rec aofRecord
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = bad
			}
		}()
		t, k := binary.Varint(p)
		if k <= 0 {
			return bad
		}
		p = p[k:]
		rec.timeMs = t
		rec.db = int(uv())
		if len(p) == 0 {
			return bad
		}
		rec.multi = p[0] == 1
		p = p[1:]
		n := uv()
		if n > uint64(len(p)) {
			return bad
		}
		rec.cmds = make([][]string, n)
		for i := range rec.cmds {
			na := uv()
			if na == 0 || na > uint64(len(p)) {
				return bad
			}
			c := make([]string, na)
			for j := range c {
				l := uv()
				if l > uint64(len(p)) {
					return bad
				}
				c[j] = string(p[:l])
				p = p[l:]
			}
			rec.cmds[i] = c
		}
		if len(p) != 0 {
			return bad
		}
		return nil
	}()
	return &rec, err
}

// ---------------------------------------------------------------------------
// The log file

// aofLog is the segment being appended to. Appends go to memory (under
// mu); flush writes them and fsyncs (one flush at a time, under syncMu), so
// concurrent Syncs share one fsync.
type aofLog struct {
	dir string

	mu       sync.Mutex
	buf      []byte
	appended int64 // bytes appended since open, over all segments

	syncMu sync.Mutex // held while writing; guards f, gen, spare, err
	f      *os.File
	gen    int64
	spare  []byte
	err    error // sticky: a failed write leaves the segment unusable
	synced atomic.Int64
}

func segmentPath(dir string, gen int64) string {
	return filepath.Join(dir, AOFPrefix+strconv.FormatInt(gen, 10))
}

// segments lists the log segments in dir, by generation.
func segments(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var gens []int64
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), AOFPrefix)
		if !ok {
			continue
		}
		if g, err := strconv.ParseInt(rest, 10, 64); err == nil && g > 0 {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

func openSegment(dir string, gen int64) (*os.File, error) {
	f, err := os.OpenFile(segmentPath(dir, gen), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *aofLog) append(rec *aofRecord) {
	l.mu.Lock()
	n := len(l.buf)
	l.buf = rec.appendTo(l.buf)
	l.appended += int64(len(l.buf) - n)
	l.mu.Unlock()
}

// flush writes and fsyncs what was appended.
func (l *aofLog) flush() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.flushLocked()
}

func (l *aofLog) flushLocked() error {
	if l.err != nil {
		return l.err
	}
	l.mu.Lock()
	b, target := l.buf, l.appended
	l.buf = l.spare[:0]
	l.mu.Unlock()
	if target <= l.synced.Load() {
		l.spare = b[:0]
		return nil
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = fmt.Errorf("write %s: %w", l.f.Name(), err)
		return l.err
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("fsync %s: %w", l.f.Name(), err)
		return l.err
	}
	l.synced.Store(target)
	l.spare = b[:0]
	return nil
}

// pending says whether something appended is not durable yet.
func (l *aofLog) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended > l.synced.Load()
}

// rotate makes the current segment durable and starts the next one; it
// returns the new generation. No append may run meanwhile (the caller holds
// orderMu). A segment that failed to write is left behind: the snapshot
// taken next covers its data.
func (l *aofLog) rotate() (int64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.flushLocked() // on failure its data is left to the snapshot
	f, err := openSegment(l.dir, l.gen+1)
	if err != nil {
		return 0, err
	}
	l.f.Close()
	l.f, l.gen, l.err = f, l.gen+1, nil
	l.mu.Lock()
	l.buf = l.buf[:0] // after a failed write: covered by the snapshot
	l.synced.Store(l.appended)
	l.mu.Unlock()
	return l.gen, nil
}

func (l *aofLog) close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	err := l.flushLocked()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeBefore deletes the segments older than gen.
func (s *Server) removeSegmentsBefore(gen int64) {
	gens, err := segments(s.dataDir)
	if err != nil {
		s.log.Warn("embedded redis: listing log segments", "err", err)
		return
	}
	for _, g := range gens {
		if g >= gen {
			break
		}
		path := segmentPath(s.dataDir, g)
		if slices.Contains(s.tornSegs, g) {
			// Evidence of a torn write: kept under another name,
			// which segments() does not list.
			if err := os.Rename(path, path+TornSuffix); err != nil {
				s.log.Warn("embedded redis: keeping a torn log segment", "err", err)
			}
			continue
		}
		if err := os.Remove(path); err != nil {
			s.log.Warn("embedded redis: removing an old log segment", "err", err)
		}
	}
}
