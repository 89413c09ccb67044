package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// A run whose ports clash stopped on the first and named it alone; the
// operator fixed one, ran again, met the next. It now names every address
// taken and points to -check-config, which checks them all without
// starting.
func TestRunNamesEveryTakenAddress(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv("ARCHIVEBOT_CONFIG", "")
	freeListeners(t)
	redisAddr, webAddr, streamAddr, apiAddr := takenPort(t), takenPort(t), takenPort(t), takenPort(t)
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", redisAddr)
	t.Setenv("ARCHIVEBOT_HTTP_LISTEN", webAddr)
	t.Setenv("ARCHIVEBOT_STREAM_LISTEN", streamAddr)

	var out, errb bytes.Buffer
	if code := run(nil, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errb.String())
	}
	for _, want := range []string{
		fmt.Sprintf("archivebot: in use now: redis.listen %s, http.listen %s, http.stream_listen %s\n", redisAddr, webAddr, streamAddr),
		"archivebot: archivebot -check-config checks every address (and the rest of the configuration) at once, without starting\n",
		"without a configuration file: -redis-listen ADDR",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("without a file: stderr does not say %q:\n%s", want, errb.String())
		}
	}

	cfg := writeTemp(t, "c.toml", fmt.Sprintf("[pipelines]\nlisten = %q\n", apiAddr))
	errb.Reset()
	if code := run([]string{"-config", cfg}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errb.String())
	}
	for _, want := range []string{
		fmt.Sprintf("in use now: redis.listen %s, http.listen %s, http.stream_listen %s, pipelines.listen %s\n", redisAddr, webAddr, streamAddr, apiAddr),
		"archivebot: archivebot -check-config -config " + cfg + " checks every address",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("with a file: stderr does not say %q:\n%s", want, errb.String())
		}
	}
}
