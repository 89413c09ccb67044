package redistest

// Fixtures: a whole Redis database written to a file and loaded again, for
// tests that start from a state another program wrote (testdata/migrate:
// a deployment of upstream's bot and pipelines, dumped at the moment of a
// switch-over).
//
// The file is text: lines starting with # say how it was produced; then
// one JSON object a line. The first is {"meta": {...}}; each other is one
// key, sorted by name:
//
//	{"key":"pending","type":"list","ttl_ms":-1,"value":["b","a"]}
//
// value is a string, a hash's field → value, a list left to right, a
// set's members sorted, or a sorted set's [member, score] pairs in score
// order. ttl_ms is the time left to live when dumped (-1: none).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FixtureMeta is the first line of a fixture.
type FixtureMeta struct {
	// DumpedAt is when the dump was read (UNIX seconds).
	DumpedAt float64 `json:"dumped_at"`
	// RedisVersion is the server's version.
	RedisVersion string `json:"redis_version,omitempty"`
}

// FixtureKey is one key of a fixture.
type FixtureKey struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	TTLms int64           `json:"ttl_ms"`
	Value json.RawMessage `json:"value"`
}

// WriteFixture writes every key of c's database to w (SCAN, then each
// key's value and TTL), after the comment lines.
func WriteFixture(ctx context.Context, c *redis.Client, w io.Writer, comments []string) error {
	var keys []string
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	meta := FixtureMeta{DumpedAt: float64(time.Now().UnixMicro()) / 1e6}
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		meta.RedisVersion = infoField(info, "redis_version")
	}
	bw := bufio.NewWriter(w)
	for _, c := range comments {
		fmt.Fprintf(bw, "# %s\n", c)
	}
	line := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		bw.Write(b)
		return bw.WriteByte('\n')
	}
	if err := line(map[string]FixtureMeta{"meta": meta}); err != nil {
		return err
	}
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			return err
		}
		var v any
		switch typ {
		case "none":
			continue // expired since the SCAN
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		case "zset":
			var z []redis.Z
			z, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
			pairs := make([][2]any, len(z))
			for i, e := range z {
				pairs[i] = [2]any{e.Member, e.Score}
			}
			v = pairs
		default:
			return fmt.Errorf("fixture: key %s has type %s, which fixtures do not hold", k, typ)
		}
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("fixture: read %s: %w", k, err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		ms := int64(-1)
		if ttl >= 0 {
			ms = ttl.Milliseconds()
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := line(FixtureKey{Key: k, Type: typ, TTLms: ms, Value: raw}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

// Fixture is a fixture read from its file.
type Fixture struct {
	Comments []string
	Meta     FixtureMeta
	Keys     []FixtureKey
}

// ReadFixture reads a fixture file.
func ReadFixture(path string) (*Fixture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fx := &Fixture{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	first := true
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#"):
			fx.Comments = append(fx.Comments, strings.TrimSpace(strings.TrimPrefix(l, "#")))
		case strings.TrimSpace(l) == "":
		case first:
			var m struct {
				Meta *FixtureMeta `json:"meta"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil || m.Meta == nil {
				return nil, fmt.Errorf("%s:%d: the first line must be {\"meta\": …}", path, n)
			}
			fx.Meta, first = *m.Meta, false
		default:
			var k FixtureKey
			if err := json.Unmarshal([]byte(l), &k); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			fx.Keys = append(fx.Keys, k)
		}
	}
	return fx, sc.Err()
}

// Key returns the fixture's key k, or nil.
func (fx *Fixture) Key(k string) *FixtureKey {
	for i := range fx.Keys {
		if fx.Keys[i].Key == k {
			return &fx.Keys[i]
		}
	}
	return nil
}

// Hash is the value of the hash k (nil when absent or not a hash).
func (fx *Fixture) Hash(k string) map[string]string {
	fk := fx.Key(k)
	if fk == nil || fk.Type != "hash" {
		return nil
	}
	var m map[string]string
	json.Unmarshal(fk.Value, &m)
	return m
}

// List is the value of the list k (nil when absent or not a list).
func (fx *Fixture) List(k string) []string {
	fk := fx.Key(k)
	if fk == nil || fk.Type != "list" {
		return nil
	}
	var l []string
	json.Unmarshal(fk.Value, &l)
	return l
}

// TimeFields are the hash fields Load moves with the clock: a job's
// queued_at, started_at and finished_at, and the ts of a pipeline's
// report or of the firehose's last broadcast.
var TimeFields = []string{"queued_at", "started_at", "finished_at", "ts"}

// Load writes the fixture into c's database (which the caller flushed).
// With shift, the times in TimeFields of every hash are moved by the time
// since the dump, so the state is as fresh as it was when dumped: a
// pipeline that had just reported has just reported. It returns the shift.
func (fx *Fixture) Load(ctx context.Context, c redis.Cmdable, shift bool) (time.Duration, error) {
	var by float64
	if shift {
		by = float64(time.Now().UnixMicro())/1e6 - fx.Meta.DumpedAt
	}
	for _, k := range fx.Keys {
		if err := loadKey(ctx, c, k, by); err != nil {
			return 0, fmt.Errorf("fixture: load %s: %w", k.Key, err)
		}
	}
	return time.Duration(by * float64(time.Second)), nil
}

func loadKey(ctx context.Context, c redis.Cmdable, k FixtureKey, shift float64) error {
	var err error
	switch k.Type {
	case "string":
		var v string
		if err = json.Unmarshal(k.Value, &v); err == nil {
			err = c.Set(ctx, k.Key, v, 0).Err()
		}
	case "hash":
		var m map[string]string
		if err = json.Unmarshal(k.Value, &m); err == nil {
			args := make([]any, 0, 2*len(m))
			for f, v := range m {
				if shift != 0 && slices.Contains(TimeFields, f) {
					v = shiftTime(v, shift)
				}
				args = append(args, f, v)
			}
			err = c.HSet(ctx, k.Key, args...).Err()
		}
	case "list":
		var l []string
		if err = json.Unmarshal(k.Value, &l); err == nil {
			err = c.RPush(ctx, k.Key, toAny(l)...).Err()
		}
	case "set":
		var l []string
		if err = json.Unmarshal(k.Value, &l); err == nil {
			err = c.SAdd(ctx, k.Key, toAny(l)...).Err()
		}
	case "zset":
		var pairs [][2]json.RawMessage
		if err = json.Unmarshal(k.Value, &pairs); err == nil {
			z := make([]redis.Z, len(pairs))
			for i, p := range pairs {
				var m string
				var s float64
				if err = json.Unmarshal(p[0], &m); err != nil {
					break
				}
				if err = json.Unmarshal(p[1], &s); err != nil {
					break
				}
				z[i] = redis.Z{Member: m, Score: s}
			}
			if err == nil {
				err = c.ZAdd(ctx, k.Key, z...).Err()
			}
		}
	default:
		err = fmt.Errorf("type %q", k.Type)
	}
	if err != nil {
		return err
	}
	if k.TTLms >= 0 {
		return c.PExpire(ctx, k.Key, time.Duration(max(k.TTLms, 1))*time.Millisecond).Err()
	}
	return nil
}

func toAny(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// shiftTime adds by seconds to v when v is a UNIX time (a number after
// 2001), keeping its shape: an integer stays one, a float keeps as many
// decimals.
func shiftTime(v string, by float64) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1e9 || math.IsInf(f, 0) {
		return v
	}
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return strconv.FormatFloat(f+by, 'f', len(v)-i-1, 64)
	}
	return strconv.FormatInt(int64(math.Round(f+by)), 10)
}
