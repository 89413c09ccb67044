package bot

import (
	"context"
	"strings"
)

// commandTable is the one table of bang commands: names, aliases, who may
// run them, where, and their syntax. The dispatcher (Bot.Handle) enforces
// permission, place and arity from it; handlers never re-check.
func commandTable() []*Command {
	return []*Command{
		{Name: "!archive", Aliases: []string{"!a"}, Perm: Voice, Mutates: true, MinArgs: 1, MaxArgs: -1, Run: runArchive(archiveKind{}),
			Usage: "!archive URL [--ignore-sets=A,B] [--no-offsite-links] [--user-agent-alias=NAME] [--pipeline=NAME] [--explain=TEXT] [--delay=MS] [--concurrency=N] [--large] [--notify-start|--no-notify-start]", Help: "archive a site recursively"},
		{Name: "!archive <", Aliases: []string{"!a <"}, Perm: Op, Mutates: true, MinArgs: 1, MaxArgs: -1, Run: runArchive(archiveKind{list: true}),
			Usage: "!archive < URL-OF-URL-LIST [options]", Help: "archive every URL listed in a text file, recursively"},
		{Name: "!archiveonly", Aliases: []string{"!ao"}, Perm: Anyone, Mutates: true, MinArgs: 1, MaxArgs: -1, Run: runArchive(archiveKind{shallow: true}),
			Usage: "!archiveonly URL [options]", Help: "archive one page and its requisites, without recursion"},
		{Name: "!archiveonly <", Aliases: []string{"!ao <"}, Perm: Anyone, Mutates: true, MinArgs: 1, MaxArgs: -1, Run: runArchive(archiveKind{shallow: true, list: true}),
			Usage: "!archiveonly < URL-OF-URL-LIST [options]", Help: "archive every URL listed in a text file, without recursion"},
		{Name: "!abort", Perm: Voice, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runAbort,
			Usage: "!abort IDENT", Help: "abort a job (at once if it has not started yet)"},
		{Name: "!ignore", Aliases: []string{"!ig"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: -1, Ident: true, Run: runIgnore,
			Usage: "!ignore IDENT PATTERN", Help: "add an ignore pattern (a Python regular expression) to a job"},
		{Name: "!unignore", Aliases: []string{"!unig", "!ug"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: -1, Ident: true, Run: runUnignore,
			Usage: "!unignore IDENT PATTERN", Help: "remove an ignore pattern from a job"},
		{Name: "!ignoreset", Aliases: []string{"!igset"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: -1, Ident: true, Run: runIgnoreSet,
			Usage: "!ignoreset IDENT NAME[,NAME...]", Help: "add the patterns of named ignore sets to a job"},
		{Name: "!ignorereports", Aliases: []string{"!igrep"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: 2, Ident: true, Run: runIgnoreReports,
			Usage: "!ignorereports IDENT on|off", Help: "show or suppress ignore pattern reports"},
		{Name: "!igon", Perm: Voice, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runIgnoreReportsSwitch(true),
			Usage: "!igon IDENT", Help: "show ignore pattern reports"},
		{Name: "!igoff", Perm: Voice, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runIgnoreReportsSwitch(false),
			Usage: "!igoff IDENT", Help: "suppress ignore pattern reports"},
		{Name: "!delay", Aliases: []string{"!d"}, Perm: Voice, Mutates: true, MinArgs: 3, MaxArgs: 3, Ident: true, Run: runDelay,
			Usage: "!delay IDENT MIN MAX (milliseconds, at most 7 digits, MIN <= MAX)", Help: "set the delay between requests"},
		{Name: "!concurrency", Aliases: []string{"!con", "!concurrent"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: 2, Ident: true, Run: runConcurrency,
			Usage: "!concurrency IDENT N (1-99)", Help: "set the number of workers"},
		{Name: "!yahoo", Perm: Voice, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runYahoo,
			Usage: "!yahoo IDENT", Help: "no delay, 4 workers"},
		{Name: "!explain", Aliases: []string{"!ex", "!reason"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: -1, Ident: true, Run: runExplain,
			Usage: "!explain IDENT NOTE", Help: "attach a note to a job"},
		{Name: "!expire", Perm: Op, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runExpire,
			Usage: "!expire IDENT", Help: "end a finished job's record now so its URL can be archived again"},
		{Name: "!fail", Perm: Op, Mutates: true, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runFail,
			Usage: "!fail IDENT", Help: "give up on a job: mark it failed and take it out of every queue"},
		{Name: "!status", Perm: Anyone, MinArgs: 0, MaxArgs: 1, Run: runStatus,
			Usage: "!status [IDENT|URL]", Help: "summary counts, or the status of one job"},
		{Name: "!pending", Perm: Anyone, MinArgs: 0, MaxArgs: 0, Run: runPending,
			Usage: "!pending", Help: "list queued jobs, next to run first (answered in private)"},
		{Name: "!whereis", Aliases: []string{"!w"}, Perm: Anyone, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runWhereis,
			Usage: "!whereis IDENT", Help: "which pipeline runs a job"},
		{Name: "!whois", Perm: Anyone, MinArgs: 1, MaxArgs: 1, Run: runWhois,
			Usage: "!whois NICK", Help: "what I know of a nick: its rank here and its services account"},
		{Name: "!history", Perm: Anyone, MinArgs: 1, MaxArgs: 1, Ident: true, Run: runHistory,
			Usage: "!history IDENT", Help: "what happened to a job and who did it (the last 5 steps in a channel, 30 in private)"},
		{Name: "!ignoresets", Aliases: []string{"!igsets"}, Perm: Anyone, MinArgs: 0, MaxArgs: 0, Run: runIgnoreSets,
			Usage: "!ignoresets", Help: "list the ignore sets !ignoreset and --ignore-sets know"},
		{Name: "!jobs", Perm: Anyone, MinArgs: 1, MaxArgs: 1, Run: runJobs,
			Usage: "!jobs PIPELINE (its nickname or id)", Help: "list the jobs a pipeline is working on"},
		{Name: "!useragent", Aliases: []string{"!ua"}, Perm: Voice, Mutates: true, MinArgs: 2, MaxArgs: 2, Ident: true, Run: runUserAgent,
			Usage: "!useragent IDENT ALIAS", Help: "change the user agent of a job that has not started yet"},
		{Name: "!move", Perm: Op, Mutates: true, MinArgs: 2, MaxArgs: 2, Ident: true, Run: runMove,
			Usage: "!move IDENT front|back|QUEUE (QUEUE: pending, pending-ao, pending-large or pending:NAME)", Help: "move a queued job to the front (next to run) or back of its queue, or to another queue of the same kind"},
		{Name: "!reroute", Perm: Op, Mutates: true, MinArgs: 1, MaxArgs: 3, Ident: true, Run: runReroute,
			Usage: "!reroute IDENT [--avoid PIPELINE] (PIPELINE: a pipeline key name; the pipeline running the job when left out)", Help: "take a job away from a pipeline that seems banned from its site and queue it again at the front, with that pipeline avoiding the site"},
		{Name: "!login", Aliases: []string{"!web"}, Perm: Anyone, MinArgs: 0, MaxArgs: 0, Run: runLogin,
			Usage: "!login", Help: "get a one-time link, in private, that signs you in to the dashboard to act on jobs with your rank here"},
		{Name: "!logout", Perm: Anyone, MinArgs: 0, MaxArgs: 0, Run: runLogout,
			Usage: "!logout", Help: "end your dashboard sessions"},
		{Name: "!pause", Perm: Op, Mutates: true, Unrecorded: true, MinArgs: 0, MaxArgs: -1, Run: runPause,
			Usage: "!pause [QUEUE|all] [REASON] (QUEUE: pending, pending-ao, pending-large or pending:NAME; all when left out)", Help: "stop handing out jobs from a queue, or from every queue, to every pipeline"},
		{Name: "!resume", Perm: Op, Mutates: true, Unrecorded: true, MinArgs: 0, MaxArgs: 1, Run: runResume,
			Usage: "!resume [QUEUE|all]", Help: "hand out a paused queue's jobs again, in order"},
		{
			Name: "!help", Perm: Anyone,
			Usage: "!help [COMMAND]",
			Help:  "list the commands, or explain one", MinArgs: 0, MaxArgs: 1,
			Run: runHelp,
		},
	}
}

// !help [COMMAND]
func runHelp(ctx context.Context, b *Bot, c *Call) error {
	if len(c.Args) == 1 {
		name := c.Args[0]
		if !strings.HasPrefix(name, "!") {
			name = "!" + name
		}
		cmd, ok := b.index[name]
		if !ok {
			c.Refuse("Sorry, there is no command %s. Try !help.", name)
			return nil
		}
		c.Reply("%s — %s (%s). Aliases: %s", cmd.Usage, cmd.Help, permName(cmd.Perm), aliasList(cmd))
		return nil
	}
	names := make([]string, 0, len(b.table))
	for _, cmd := range b.table {
		names = append(names, cmd.Name)
	}
	c.Reply("Commands: %s. Use !help COMMAND for one of them.", strings.Join(names, ", "))
	return nil
}

func permName(p Perm) string {
	switch p {
	case Op:
		return "channel operators"
	case Voice:
		return "voiced users and operators"
	}
	return "anyone"
}

func aliasList(c *Command) string {
	if len(c.Aliases) == 0 {
		return "none"
	}
	return strings.Join(c.Aliases, ", ")
}
