package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/store"
)

// When Redis takes a command but does not answer in time (it is stopped,
// overloaded, or the connection drops after the command was sent), the
// bot cannot know whether the change was made. It says so at once, and
// follows up: every state-changing command runs under a command id that
// the store's write scripts record in the same step as the change (see
// store.WithCommand). Once Redis answers again the bot runs the
// command again under the same id: if the first send was applied, the
// script returns its recorded result and changes nothing; if it never
// arrived, it is applied now. Either way the bot knows what finally
// happened and tells the user, and the change is made at most once. After
// OutcomeWait without an answer it tells the user the outcome is still
// unknown.

// Bounds of the follow-up (its wait, config.DefaultOutcomeWait, is
// configurable).
const (
	// outcomePollMax bounds the pause between two checks of Redis.
	outcomePollMax = 5 * time.Second
	// outcomeRunTimeout bounds one resend of a command.
	outcomeRunTimeout = 30 * time.Second
)

// recordTTL is how long a command's outcome record outlives the command:
// well past the last resend.
func (b *Bot) recordTTL() time.Duration {
	return max(store.DefaultCommandTTL, 2*b.opts.OutcomeWait+outcomeRunTimeout)
}

// withCommandID gives a state-changing command its id.
func (b *Bot) withCommandID(ctx context.Context) (context.Context, string) {
	id := uuid.NewString()
	return store.WithCommand(ctx, id, b.recordTTL()), id
}

// effect says what the user asked for, for "I don't know yet whether …".
func (c *Call) effect() string {
	if c.Effect != "" {
		return c.Effect
	}
	return fmt.Sprintf("your %s took effect", strings.TrimSpace(text.Cut(c.Req.Text, 117)))
}

// outcomeUnknown answers a command whose write got no reply and starts
// the follow-up.
func (b *Bot) outcomeUnknown(call *Call, id string, err error) {
	b.log.Warn("command outcome unknown: redis did not answer", "command", call.Cmd.Name, "nick", call.Req.Nick, "command_id", id, "err", err)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		// No follow-up can start: promise nothing.
		call.Reply("Redis did not answer in time and I'm shutting down; I don't know whether %s. Check with !status later.", call.effect())
		return
	}
	call.Reply("Redis did not answer in time; I don't know yet whether %s — I'll tell you when I know.", call.effect())
	// The command's own context ends when Handle returns; the follow-up
	// lives until Close (run.Go counts it in b.wg while b.mu is held).
	run.Go(&b.wg, b.log, "command follow-up", func() { b.followUp(b.life, call, id) })
}

// bufReplier holds a resend's replies until its outcome is known.
type bufReplier struct{ lines []func(Replier) }

func (r *bufReplier) Reply(line string) {
	r.lines = append(r.lines, func(o Replier) { o.Reply(line) })
}
func (r *bufReplier) Private(line string) {
	r.lines = append(r.lines, func(o Replier) { o.Private(line) })
}

// followUp waits for Redis, resends the command under its id and reports
// what happened, or that the outcome is still unknown after OutcomeWait.
func (b *Bot) followUp(ctx context.Context, call *Call, id string) {
	deadline := time.Now().Add(b.opts.OutcomeWait)
	pause := b.opts.OutcomePoll
	for {
		wait := min(pause, time.Until(deadline))
		if wait < 0 {
			wait = 0
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			b.log.Warn("shutting down with a command outcome unknown", "command", call.Cmd.Name, "nick", call.Req.Nick, "command_id", id)
			return
		}
		if time.Now().After(deadline) {
			b.log.Warn("command outcome still unknown", "command", call.Cmd.Name, "nick", call.Req.Nick, "command_id", id)
			waited := b.opts.OutcomeWait
			if waited > time.Second {
				waited = waited.Round(time.Second)
			}
			call.Reply("Redis has still not answered after %s; I still don't know whether %s. Check with !status before trying again.",
				waited, call.effect())
			return
		}
		pause = min(2*pause, outcomePollMax)
		if b.resend(ctx, call, id) {
			return
		}
	}
}

// resend runs the command again under its id; it reports whether the
// outcome is now known (and told).
func (b *Bot) resend(ctx context.Context, call *Call, id string) bool {
	rctx, cancel := context.WithTimeout(ctx, outcomeRunTimeout)
	defer cancel()
	if b.store.Ping(rctx) != nil {
		return false
	}
	buf := &bufReplier{}
	again := *call
	again.Out = buf
	err := call.Cmd.Run(store.WithCommand(rctx, id, b.recordTTL()), b, &again)
	if err != nil && store.IsUnavailable(err) {
		return false // still no answer, or no connection: try again later
	}
	if err != nil {
		b.log.Error("command follow-up failed", "command", call.Cmd.Name, "nick", call.Req.Nick, "command_id", id, "err", err)
		call.Reply("Redis has answered, but something went wrong finding out whether %s; the operators can find the details in the log.", call.effect())
		return true
	}
	b.log.Info("command outcome known", "command", call.Cmd.Name, "nick", call.Req.Nick, "command_id", id)
	first := true
	for _, line := range buf.lines {
		if first {
			// Say which command the late answer belongs to.
			line(prefixed{call.Out, "Redis has answered about " + quoteCommand(call.Req.Text) + ": "})
			first = false
			continue
		}
		line(call.Out)
	}
	if first {
		call.Reply("Redis has answered about %s.", quoteCommand(call.Req.Text))
	}
	return true
}

// prefixed puts a prefix before the text of a Reply.
type prefixed struct {
	Replier
	prefix string
}

func (p prefixed) Reply(line string) { p.Replier.Reply(p.prefix + line) }

func quoteCommand(s string) string {
	return "\"" + text.Cut(strings.TrimSpace(s), 77) + "\""
}

// Close stops the follow-ups of commands whose outcome is unknown and
// waits for them; call it when no more commands come.
func (b *Bot) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
