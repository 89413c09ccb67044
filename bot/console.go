package bot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/archiveteam/archivebot-go/internal/text"
)

// ConsoleChannel is the started_in value of jobs queued from the console.
const ConsoleChannel = "console"

// Console is the console front end: commands typed on stdin, replies on
// stdout, without the "nick: " prefix. The console user counts as a
// channel operator. It also implements news.Announcer, printing
// reports.
type Console struct {
	Bot  *Bot
	User string
	In   io.Reader
	Out  io.Writer

	mu sync.Mutex
}

// Run reads commands until EOF or until ctx ends. It returns nil at EOF.
func (c *Console) Run(ctx context.Context) error {
	lines := make(chan string)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(c.In)
		sc.Buffer(make([]byte, 64*1024), 64*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		errc <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case line := <-lines:
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if !c.Bot.IsCommand(line) {
				c.println("(not a command; try !status, or !help for the list)")
				continue
			}
			req := Request{Nick: c.User, Channel: ConsoleChannel, Rank: RankOp, Text: line}
			c.Bot.Handle(ctx, req, consoleReplier{c})
		}
	}
}

func (c *Console) println(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintln(c.Out, text.Clean(line, text.Bot))
}

type consoleReplier struct{ c *Console }

func (r consoleReplier) Reply(line string)   { r.c.println(line) }
func (r consoleReplier) Private(line string) { r.c.println(line) }

// Announce prints a report. Reports for IRC channels (jobs queued by other
// tools) are printed with the channel name.
func (c *Console) Announce(ctx context.Context, channel, line string) error {
	if channel != ConsoleChannel {
		line = "[" + channel + "] " + line
	}
	c.println(line)
	return nil
}

// Channels lists the console's one channel.
func (c *Console) Channels() []string { return []string{ConsoleChannel} }
