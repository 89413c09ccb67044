package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"time"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The example file documents every key with its default: loading it must
// give exactly the defaults.
func TestExampleIsDefaults(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	got, err := Load("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	got.File = ""
	want.IRC.Channels = []string{"#archivebot"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("example differs from defaults (-want +got):\n%s", d)
	}
}

func TestLoadErrorsNameFileAndKey(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	cases := []struct{ text, want string }{
		{"[irc]\nnick = \"x\"\nbogus = 1\n", "unknown key irc.bogus"},
		{"[reaper]\ninterval = \"soon\"\n", "soon"},
		{"[irc]\nserver = \"http://x\"\nchannels=[\"#a\"]\n", "irc.server"},
		{"[irc]\nserver = \"irc://x\"\n", "irc.channels"},
		{"[irc]\nchannels = [\"nohash\"]\n", "irc.channels"},
		{"[irc]\nsasl = \"nocolon\"\n", "irc.sasl"},
		{"[tweeter]\nconsumer_key = \"k\"\n", "tweeter"},
		{"[tweeter]\napi = \"v3\"\n", "tweeter.api"},
		{"[redis]\nlisten = \"nope\"\n", "redis.listen"},
		{"[jobs]\nschemes = [\"HTTP\"]\n", "jobs.schemes"},
		{"[notifier]\npipeline_silent_after = \"1s\"\n", "notifier.pipeline_silent_after"},
	}
	for _, c := range cases {
		p := write(t, c.text)
		_, err := Load(p)
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: error %q should name %q and the file", c.text, err, c.want)
		}
	}
}

func TestRedisURLFromEnvironment(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://10.0.0.5:6379/2")
	c, err := Load(write(t, "[redis]\nurl = \"redis://other:1/0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.URL != "redis://10.0.0.5:6379/2" || c.Embedded() {
		t.Fatalf("url = %q", c.Redis.URL)
	}
}

func TestDurationsAndModes(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, "[irc]\nserver = \"ircs://irc.example:6697\"\nchannels = [\"#a\", \"#b key\"]\n[reaper]\ninterval = \"500ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Reaper.Interval.Duration != 500*time.Millisecond || c.Console() || !c.Embedded() {
		t.Fatalf("got %+v", c)
	}
	d := Default()
	if !d.Console() || d.Redis.Listen != "127.0.0.1:6379" || d.Reaper.Threshold != 3600 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestHTTPListen(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	if d := Default(); d.HTTP.Listen != "127.0.0.1:4567" {
		t.Fatalf("default http.listen = %q", d.HTTP.Listen)
	}
	c, err := Load(write(t, "[irc]\nnick = \"x\"\n"))
	if err != nil || c.HTTP.Listen != "127.0.0.1:4567" {
		t.Fatalf("left out: %q, %v", c.HTTP.Listen, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"\"\n"))
	if err != nil || c.HTTP.Listen != "" {
		t.Fatalf(`listen = "": %q, %v (want off)`, c.HTTP.Listen, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"0.0.0.0:8080\"\n"))
	if err != nil || c.HTTP.Listen != "0.0.0.0:8080" {
		t.Fatalf("explicit: %q, %v", c.HTTP.Listen, err)
	}
	p := write(t, "[http]\nlisten = \"nope\"\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("bad listen: %v", err)
	}
}

// The live stream's keys: left out they take their defaults; "" and 0
// mean off; bad values name the key.
func TestHTTPStreamKeys(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, "[irc]\nnick = \"x\"\n"))
	if err != nil || c.HTTP.StreamListen != "127.0.0.1:4568" || c.HTTP.StreamMaxLag != 10000 || !c.HTTP.StreamOn() {
		t.Fatalf("defaults: %+v, %v", c.HTTP, err)
	}
	c, err = Load(write(t, "[http]\nstream_listen = \"\"\nstream_max_lag = 0\n"))
	if err != nil || c.HTTP.StreamListen != "" || c.HTTP.StreamMaxLag != 0 || !c.HTTP.StreamOn() {
		t.Fatalf("off: %+v, %v", c.HTTP, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"\"\n"))
	if err != nil || c.HTTP.StreamOn() {
		t.Fatalf("listen = \"\" must switch the stream off too: %+v, %v", c.HTTP, err)
	}
	for text, key := range map[string]string{
		"[http]\nstream_listen = \"nope\"\n": "http.stream_listen",
		"[http]\nstream_max_lag = -1\n":      "http.stream_max_lag",
	} {
		if _, err := Load(write(t, text)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", text, err, key)
		}
	}
}
