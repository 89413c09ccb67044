package main

// `archivebot healthcheck`: the image's HEALTHCHECK. The distroless base
// has no shell and no curl, so the binary asks its own node.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/config"
)

// runHealthcheck asks the node of the configuration (http.listen, or
// -http-listen / ARCHIVEBOT_HTTP_LISTEN) for /readyz (-live: /healthz)
// and exits 0 when it answers 200, 1 otherwise, saying why.
func runHealthcheck(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("healthcheck", stderr)
	var configPath, listen string
	registerConfigFlag(fs, &configPath, "none: ARCHIVEBOT_HTTP_LISTEN, else the default address")
	fs.StringVar(&listen, "http-listen", "", "address of the node's web server (http.listen; env "+config.EnvHTTPListen+")")
	live := fs.Bool("live", false, "ask /healthz (the process serves) instead of /readyz (Redis answers, IRC connected, services running)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "archivebot healthcheck: takes no arguments, got %q\n", strings.Join(pos, " "))
		return 2
	}
	if configPath == "" {
		configPath = (&nodeOptions{}).configPath()
	}
	cfg, err := config.LoadWith(configPath, config.Overrides{HTTPListen: listen})
	if err != nil {
		fmt.Fprintf(stderr, "archivebot healthcheck: %v\n", err)
		return 1
	}
	if cfg.HTTP.Listen == "" {
		fmt.Fprintln(stderr, "archivebot healthcheck: http.listen is off (\"\"): there is no web server to ask")
		return 1
	}
	host, port, _ := net.SplitHostPort(cfg.HTTP.Listen)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot healthcheck: %v\n", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot healthcheck: cannot reach %s: %v\n", url, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "archivebot healthcheck: %s: not ready (%s): %s\n", url, resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, resp.Status)
	return 0
}
