package embeddedredis

// The write-ahead log (aof.go): replay at start, and what a damaged log
// does.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

type replayStats struct {
	records, segments int
	tornBytes         int64
	torn              []int64 // segments with a torn tail, kept as evidence
}

// ErrLogDamaged is wrapped by the error of Start when a log segment is
// damaged before its tail: intact records follow the damage, so replaying
// up to it would silently lose writes that were acknowledged. Start then
// deletes nothing (see doc/reliability.md for what the operator can do).
var ErrLogDamaged = errors.New("embedded redis: a log segment is damaged before its end")

// TornSuffix is appended to the name of a log segment whose tail was torn
// (the process died while writing it) once a snapshot holds what was
// replayed of it: the segment is kept as evidence instead of deleted.
const TornSuffix = ".torn"

// scanBudget bounds the bytes findRecord checksums; past it the damage
// is taken as not at the tail (the safe side: the server does not start).
const scanBudget = 4 << 30

// findRecord returns the offset in b of the first intact record (length,
// checksum and payload all valid) at or after offset from, or -1. ok is
// false when the scan gave up (scanBudget).
func findRecord(b []byte, from int) (at int, ok bool) {
	budget := int64(scanBudget)
	for i := from; i+8 <= len(b); i++ {
		size := int(binary.LittleEndian.Uint32(b[i:]))
		if size < 5 || size > len(b)-i-8 {
			continue
		}
		if budget -= int64(size); budget < 0 {
			return -1, false
		}
		payload := b[i+8 : i+8+size]
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[i+4:]) {
			continue
		}
		if rec, err := decodePayload(payload); err == nil && len(rec.cmds) > 0 {
			return i, true
		}
	}
	return -1, true
}

// damageAtTail says whether the bad record at offset off of the open
// segment f is a torn tail (no intact record after it), and if not, the
// offset of the next intact record.
func damageAtTail(f *os.File, off, size int64) (tail bool, next int64, err error) {
	if size-off > maxRecord {
		return false, -1, nil // not a torn write of ours: they are smaller
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return false, -1, err
	}
	at, ok := findRecord(b, 1)
	if !ok {
		return false, -1, nil
	}
	if at < 0 {
		return true, -1, nil
	}
	return false, off + int64(at), nil
}

// replay runs the records of the given segments, in order, on a connection
// of our own.
func (s *Server) replay(gens []int64) (replayStats, error) {
	var st replayStats
	c, err := s.localConn()
	if err != nil {
		return st, err
	}
	defer c.close()
	defer s.replayMs.Store(0)
	for _, g := range gens {
		path := segmentPath(s.dataDir, g)
		f, err := os.Open(path)
		if err != nil {
			return st, fmt.Errorf("embedded redis: log %s: %w", path, err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return st, fmt.Errorf("embedded redis: log %s: %w", path, err)
		}
		r := bufio.NewReaderSize(f, 256<<10)
		var off int64
		for {
			rec, n, err := readRecord(r)
			if err == io.EOF {
				break
			}
			if err != nil {
				tail, next, serr := damageAtTail(f, off, info.Size())
				if serr != nil {
					f.Close()
					return st, fmt.Errorf("embedded redis: log %s: %w", path, serr)
				}
				if !tail {
					f.Close()
					where := "the damage cannot be told from a torn write"
					if next >= 0 {
						where = fmt.Sprintf("an intact record follows at byte offset %d", next)
					}
					return st, fmt.Errorf("%w: %s is damaged at byte offset %d (%v), and %s, so records after the damage would be lost; "+
						"not starting, nothing was deleted (doc/reliability.md says how to recover)", ErrLogDamaged, path, off, err, where)
				}
				st.tornBytes += info.Size() - off
				st.torn = append(st.torn, g)
				s.log.Warn("embedded redis: the end of a log segment is torn (the process died while writing it); replayed the records before it, the segment is kept as "+filepath.Base(path)+TornSuffix,
					"file", path, "offset", off, "bytes", info.Size()-off, "err", err)
				break
			}
			off += int64(n)
			s.replayMs.Store(max(rec.timeMs, 1))
			c.send("SELECT", strconv.Itoa(rec.db))
			if rec.multi {
				c.send("MULTI")
			}
			for _, cmd := range rec.cmds {
				if cmd[0] == "EVAL" && len(cmd) > 1 {
					// miniredis caches it: an EVALSHA of it may follow.
					s.rememberScript(cmd[1])
				}
				c.send(cmd...)
			}
			if rec.multi {
				c.send("EXEC")
			}
			st.records++
		}
		f.Close()
		st.segments++
	}
	return st, nil
}
