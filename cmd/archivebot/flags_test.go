package main

import (
	"bytes"
	"testing"

	"github.com/archiveteam/archivebot-go/config"
)

// defaultHTTP is http.listen's default.
const defaultHTTP = "127.0.0.1:4567"

// TestEmptyListenFlagSwitchesOff: -stream-listen ""
// and -http-listen "" switch their listener off, over the file, the
// environment and the default, as `stream_listen = ""` does in the file;
// a flag not given changes nothing.
func TestEmptyListenFlagSwitchesOff(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args             []string
		env              string // ARCHIVEBOT_STREAM_LISTEN
		listen, streamAt string
	}{
		{"no flags", nil, "", defaultHTTP, config.DefaultStreamListen},
		{"stream off", []string{"-stream-listen", ""}, "", defaultHTTP, ""},
		{"stream off, written =", []string{"-stream-listen="}, "", defaultHTTP, ""},
		{"stream off over the environment", []string{"-stream-listen", ""}, "127.0.0.1:4999", defaultHTTP, ""},
		{"stream moved", []string{"-stream-listen", "127.0.0.1:4998"}, "", defaultHTTP, "127.0.0.1:4998"},
		{"web off", []string{"-http-listen", ""}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(config.EnvStreamListen, tc.env)
			t.Setenv(config.EnvHTTPListen, "")
			fs, o := nodeFlags(&bytes.Buffer{})
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := config.LoadWith("", o.overrides())
			if err != nil {
				t.Fatal(err)
			}
			stream := ""
			if c.HTTP.StreamOn() {
				stream = c.HTTP.StreamListen
			}
			if c.HTTP.Listen != tc.listen || stream != tc.streamAt {
				t.Errorf("%q: http.listen %q, stream %q; want %q, %q", tc.args, c.HTTP.Listen, stream, tc.listen, tc.streamAt)
			}
		})
	}
}
