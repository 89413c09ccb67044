package irc

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"sync"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
)

// tracker keeps the channel state irc-go does not: who is in which channel
// with which prefix modes, from NAMES, MODE, JOIN, PART, KICK, QUIT and NICK,
// read through the server's ISUPPORT (PREFIX, CHANMODES, CHANTYPES,
// CASEMAPPING). The server delivers lines in order and ircevent runs
// callbacks in order on one goroutine, so a MODE or NICK the server sent
// before a command is always applied before that command is judged.
type tracker struct {
	mu sync.Mutex

	me string // our current nick

	// ISUPPORT. prefixModes[i] is the mode letter of prefixChars[i],
	// highest rank first.
	prefixModes string
	prefixChars string
	chanTypes   string
	// chanModes are the CHANMODES groups A (list), B (always a parameter),
	// C (a parameter when set), D (never a parameter).
	chanModes [4]string
	caseMap   string
	nickLen   int
	// multiPrefix is set when the multi-prefix capability was
	// negotiated: NAMES then lists every prefix a member holds.
	multiPrefix bool
	// extendedJoin, accountNotify and accountTag are set when those
	// capabilities were negotiated: the server then tells each member's
	// services account (JOIN's second parameter, ACCOUNT lines, the
	// "account" tag of a user's messages).
	extendedJoin, accountNotify, accountTag bool
	// botMode is the user mode of ISUPPORT's BOT token ("" when the
	// server does not advertise it).
	botMode string
	// chatHistory: the server advertises CHATHISTORY (ISUPPORT).
	chatHistory bool
	// whox is set when ISUPPORT advertises WHOX: WHO can return each
	// member's account (whoxToken marks the bot's own queries).
	whox bool

	channels map[string]*channelState // by folded name
	// accounts holds, by folded nick, the services account ("" for none)
	// of the nicks in our channels whose account the server told.
	accounts map[string]string
	// presence names, by folded nick, each nick's unbroken stay in our
	// channels: a random id given when the nick is first seen in one of
	// them (JOIN, NAMES, a NICK to it) and dropped when it is in none
	// (PART, KICK, QUIT, a NICK away, a new connection). A dashboard
	// session made without an account is bound to it (doc/web.md, What
	// is promised).
	presence map[string]string
	// ended are the folded nicks whose presence ended since takeEnded.
	ended []string
}

type channelState struct {
	name    string
	members map[string]*member // by folded nick
	// names collects a NAMES reply (353…366) before it replaces members.
	names map[string]*member
}

type member struct {
	nick  string
	modes string // prefix mode letters the member holds, e.g. "ov"
}

func newTracker(nick string) *tracker {
	t := &tracker{me: nick, channels: map[string]*channelState{}, accounts: map[string]string{}, presence: map[string]string{}}
	t.resetISupport()
	return t
}

// resetISupport restores RFC 1459 defaults, used until the server's 005
// says otherwise.
func (t *tracker) resetISupport() {
	t.prefixModes, t.prefixChars = "ov", "@+"
	t.chanTypes = "#&"
	t.chanModes = [4]string{"beI", "k", "l", "imnpst"}
	t.caseMap = "rfc1459"
	t.nickLen = 0
	t.botMode = ""
	t.chatHistory = false
	t.whox = false
}

// reset forgets every channel, for a new connection.
func (t *tracker) reset(nick string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.me = nick
	t.multiPrefix = false
	t.extendedJoin, t.accountNotify, t.accountTag = false, false, false
	t.channels = map[string]*channelState{}
	t.accounts = map[string]string{}
	for k := range t.presence {
		t.ended = append(t.ended, k)
	}
	t.presence = map[string]string{}
	t.resetISupport()
}

// fold maps a nick or channel name to its case-insensitive key under the
// server's CASEMAPPING.
func (t *tracker) fold(s string) string {
	return foldCase(t.caseMap, s)
}

func foldCase(caseMap, s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case caseMap == "rfc1459" && (c == '[' || c == ']' || c == '\\' || c == '^'):
			// rfc1459: {}|~ are the lower-case forms of []\^.
			c += '{' - '['
		case caseMap == "strict-rfc1459" && (c == '[' || c == ']' || c == '\\'):
			c += '{' - '['
		}
		b.WriteByte(c)
	}
	return b.String()
}

// isChannel reports whether target names a channel.
func (t *tracker) isChannel(target string) bool {
	return target != "" && strings.IndexByte(t.chanTypes, target[0]) >= 0
}

// Me returns our current nick.
func (t *tracker) Me() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.me
}

// NickLen returns the server's NICKLEN, 0 if it gave none.
func (t *tracker) NickLen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nickLen
}

// Fold folds s under the current case mapping.
func (t *tracker) Fold(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fold(s)
}

// IsChannel reports whether target names a channel.
func (t *tracker) IsChannel(target string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.isChannel(target)
}

// Joined reports whether we are in channel.
func (t *tracker) Joined(channel string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.channels[t.fold(channel)]
	return ok
}

// JoinedChannels lists the channels we are in.
func (t *tracker) JoinedChannels() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.channels))
	for _, c := range t.channels {
		out = append(out, c.name)
	}
	return out
}

// Rank is nick's rank in channel: op for "@" or any prefix ranked above
// it, voice for any other prefix ("+", "%"), none otherwise or when nick is
// not in the channel.
func (t *tracker) Rank(channel, nick string) bot.Rank {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.channels[t.fold(channel)]
	if c == nil {
		return bot.RankNone
	}
	m := c.members[t.fold(nick)]
	if m == nil {
		return bot.RankNone
	}
	return t.rankOf(m.modes)
}

// In reports whether nick is in channel.
func (t *tracker) In(channel, nick string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.channels[t.fold(channel)]
	return c != nil && c.members[t.fold(nick)] != nil
}

func (t *tracker) rankOf(modes string) bot.Rank {
	if modes == "" {
		return bot.RankNone
	}
	opIdx := strings.IndexByte(t.prefixModes, 'o')
	if opIdx < 0 {
		// A server without "o": its highest prefix is the operator's.
		opIdx = 0
	}
	rank := bot.RankNone
	for i := 0; i < len(modes); i++ {
		idx := strings.IndexByte(t.prefixModes, modes[i])
		switch {
		case idx < 0:
		case idx <= opIdx:
			return bot.RankOp
		default:
			rank = bot.RankVoice
		}
	}
	return rank
}

// event is something the client acts on beyond bookkeeping.
type event struct {
	kind    eventKind
	channel string
	nick    string // the other nick (renames, quits)
	reason  string
}

type eventKind int

const (
	evNone       eventKind = iota
	evSelfJoin             // we joined channel
	evSelfPart             // we left channel (PART)
	evSelfKicked           // we were kicked from channel
	evJoinFailed           // a JOIN of channel was refused (reason)
	evNickGone             // nick quit or renamed away: a held nick may be free
	evSelfNick             // our nick changed
	evNamesStale           // channel's NAMES should be asked for again
	evBotMode              // the server advertises a bot mode (ISUPPORT BOT)
)

// joinErrors are the numerics a server answers a refused JOIN with.
var joinErrors = map[string]bool{
	"403": true, // ERR_NOSUCHCHANNEL
	"405": true, // ERR_TOOMANYCHANNELS
	"437": true, // ERR_UNAVAILRESOURCE
	"471": true, // ERR_CHANNELISFULL
	"473": true, // ERR_INVITEONLYCHAN
	"474": true, // ERR_BANNEDFROMCHAN
	"475": true, // ERR_BADCHANNELKEY
	"476": true, // ERR_BADCHANMASK
	"477": true, // ERR_NEEDREGGEDNICK
	"479": true, // ERR_BADCHANNAME (some servers)
	"489": true, // ERR_SECUREONLYCHAN
}

// handle applies one server line to the state and reports what the
// client should act on.
func (t *tracker) handle(msg ircmsg.Message) []event {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch msg.Command {
	case "JOIN", "PART", "KICK", "QUIT", "NICK", "366":
		defer t.syncPresence()
	}
	src := msg.Nick()
	p := msg.Params
	switch msg.Command {
	case "001":
		if len(p) > 0 && p[0] != "" {
			t.me = p[0]
		}
	case "005":
		if len(p) >= 2 {
			had := t.botMode
			t.isupport(p[1:])
			if t.botMode != "" && had == "" {
				return []event{{kind: evBotMode}}
			}
		}
	case "ACCOUNT": // account-notify: :nick!u@h ACCOUNT name (or *)
		if t.accountNotify && len(p) >= 1 && src != "" {
			t.setAccount(src, p[0])
		}
	case "PRIVMSG", "NOTICE":
		// account-tag: a user's message carries its account, or no tag
		// when the user is not logged in.
		if t.accountTag && src != "" && strings.Contains(msg.Source, "!") {
			_, acct := msg.GetTag("account")
			t.setAccount(src, acct)
		}
	case "JOIN":
		if len(p) < 1 || src == "" {
			return nil
		}
		var evs []event
		for _, name := range strings.Split(p[0], ",") {
			if !t.isChannel(name) {
				continue
			}
			key := t.fold(name)
			if t.fold(src) == t.fold(t.me) {
				t.channels[key] = &channelState{name: name, members: map[string]*member{
					t.fold(src): {nick: src},
				}}
				evs = append(evs, event{kind: evSelfJoin, channel: name})
				continue
			}
			if c := t.channels[key]; c != nil {
				c.members[t.fold(src)] = &member{nick: src}
			}
		}
		if t.extendedJoin && len(p) >= 2 {
			t.setAccount(src, p[1])
		}
		return evs
	case "PART":
		if len(p) < 1 || src == "" {
			return nil
		}
		var evs []event
		for _, name := range strings.Split(p[0], ",") {
			key := t.fold(name)
			c := t.channels[key]
			if c == nil {
				continue
			}
			if t.fold(src) == t.fold(t.me) {
				delete(t.channels, key)
				evs = append(evs, event{kind: evSelfPart, channel: c.name})
				continue
			}
			delete(c.members, t.fold(src))
		}
		t.forgetAccounts()
		return evs
	case "KICK":
		if len(p) < 2 {
			return nil
		}
		key := t.fold(p[0])
		c := t.channels[key]
		if c == nil {
			return nil
		}
		if t.fold(p[1]) == t.fold(t.me) {
			delete(t.channels, key)
			reason := ""
			if len(p) > 2 {
				reason = p[2]
			}
			return []event{{kind: evSelfKicked, channel: c.name, nick: src, reason: reason}}
		}
		delete(c.members, t.fold(p[1]))
		t.forgetAccounts()
	case "QUIT":
		if src == "" {
			return nil
		}
		k := t.fold(src)
		for _, c := range t.channels {
			delete(c.members, k)
		}
		delete(t.accounts, k)
		return []event{{kind: evNickGone, nick: src}}
	case "NICK":
		if len(p) < 1 || src == "" || p[0] == "" {
			return nil
		}
		oldKey, newNick := t.fold(src), p[0]
		for _, c := range t.channels {
			if m := c.members[oldKey]; m != nil {
				delete(c.members, oldKey)
				m.nick = newNick
				c.members[t.fold(newNick)] = m
			}
		}
		if a, ok := t.accounts[oldKey]; ok {
			delete(t.accounts, oldKey)
			t.accounts[t.fold(newNick)] = a
		}
		if oldKey == t.fold(t.me) {
			t.me = newNick
			return []event{{kind: evSelfNick, nick: newNick}}
		}
		return []event{{kind: evNickGone, nick: src}}
	case "MODE":
		if len(p) < 2 {
			return nil
		}
		if c := t.channels[t.fold(p[0])]; c != nil {
			if t.applyModes(c, p[1], p[2:]) && !t.multiPrefix {
				// Without multi-prefix NAMES showed only the highest
				// prefix: after losing it a member may still hold a
				// lower one we never saw.
				return []event{{kind: evNamesStale, channel: c.name}}
			}
		}
	case "353": // RPL_NAMREPLY me [=*@] #chan :[prefixes]nick[!user@host] …
		if len(p) < 3 {
			return nil
		}
		chanIdx := 1
		if len(p) >= 4 {
			chanIdx = 2
		}
		c := t.channels[t.fold(p[chanIdx])]
		if c == nil {
			return nil
		}
		if c.names == nil {
			c.names = map[string]*member{}
		}
		for _, entry := range strings.Fields(p[len(p)-1]) {
			if m := t.parseName(entry); m != nil {
				c.names[t.fold(m.nick)] = m
			}
		}
	case "354": // RPL_WHOSPCRPL me TOKEN nick account (our WHO %tna)
		if len(p) < 4 || p[1] != whoxToken || !t.accountsTold() {
			return nil
		}
		k := t.fold(p[2])
		for _, c := range t.channels {
			if c.members[k] != nil || c.names[k] != nil {
				acct := p[3]
				if acct == "0" { // logged into none
					acct = ""
				}
				t.accounts[k] = acct
				break
			}
		}
	case "366": // RPL_ENDOFNAMES me #chan :End of NAMES list
		if len(p) < 2 {
			return nil
		}
		c := t.channels[t.fold(p[1])]
		if c == nil || c.names == nil {
			return nil
		}
		// NAMES is the truth as of now; keep ourselves even if a server
		// left us out.
		if _, ok := c.names[t.fold(t.me)]; !ok {
			if m := c.members[t.fold(t.me)]; m != nil {
				c.names[t.fold(t.me)] = m
			}
		}
		c.members, c.names = c.names, nil
	default:
		if joinErrors[msg.Command] && len(p) >= 2 {
			reason := ""
			if len(p) > 2 {
				reason = p[len(p)-1]
			}
			return []event{{kind: evJoinFailed, channel: p[1], reason: msg.Command + " " + reason}}
		}
	}
	return nil
}

// parseName reads one NAMES entry: prefix characters (several with
// multi-prefix), the nick, and with userhost-in-names "!user@host".
func (t *tracker) parseName(entry string) *member {
	i := 0
	var modes []byte
	for i < len(entry) {
		idx := strings.IndexByte(t.prefixChars, entry[i])
		if idx < 0 {
			break
		}
		if idx < len(t.prefixModes) && strings.IndexByte(string(modes), t.prefixModes[idx]) < 0 {
			modes = append(modes, t.prefixModes[idx])
		}
		i++
	}
	nick := entry[i:]
	if j := strings.IndexByte(nick, '!'); j >= 0 {
		nick = nick[:j]
	}
	if nick == "" {
		return nil
	}
	return &member{nick: nick, modes: string(modes)}
}

// applyModes applies "+ov-v a b c" to a channel's members. Modes that take
// a parameter consume one even when they are not prefix modes, so the
// parameters stay aligned with their letters. It reports whether a member
// lost a prefix mode.
func (t *tracker) applyModes(c *channelState, modes string, args []string) (removed bool) {
	adding := true
	for i := 0; i < len(modes); i++ {
		m := modes[i]
		switch m {
		case '+':
			adding = true
			continue
		case '-':
			adding = false
			continue
		}
		takesArg := false
		isPrefix := strings.IndexByte(t.prefixModes, m) >= 0
		switch {
		case isPrefix:
			takesArg = true
		case strings.IndexByte(t.chanModes[0], m) >= 0, strings.IndexByte(t.chanModes[1], m) >= 0:
			takesArg = true
		case strings.IndexByte(t.chanModes[2], m) >= 0:
			takesArg = adding
		}
		if !takesArg {
			continue
		}
		if len(args) == 0 {
			return removed
		}
		arg := args[0]
		args = args[1:]
		if !isPrefix {
			continue
		}
		mem := c.members[t.fold(arg)]
		if mem == nil {
			continue
		}
		has := strings.IndexByte(mem.modes, m) >= 0
		switch {
		case adding && !has:
			mem.modes += string(m)
		case !adding && has:
			mem.modes = strings.ReplaceAll(mem.modes, string(m), "")
			removed = true
		}
	}
	return removed
}

// isupport reads 005 tokens (the last parameter is the human text).
func (t *tracker) isupport(tokens []string) {
	if len(tokens) > 1 {
		tokens = tokens[:len(tokens)-1]
	}
	for _, tok := range tokens {
		name, value, _ := strings.Cut(tok, "=")
		switch strings.ToUpper(name) {
		case "PREFIX":
			// PREFIX=(qaohv)~&@%+ ; an empty value means no prefixes.
			if value == "" {
				t.prefixModes, t.prefixChars = "", ""
				continue
			}
			if len(value) > 0 && value[0] == '(' {
				if end := strings.IndexByte(value, ')'); end > 0 {
					modes, chars := value[1:end], value[end+1:]
					if len(modes) == len(chars) {
						t.prefixModes, t.prefixChars = modes, chars
					}
				}
			}
		case "BOT":
			// BOT=B: the user mode that marks a bot.
			t.botMode = value
			if t.botMode == "" {
				t.botMode = "B"
			}
		case "WHOX":
			t.whox = true
		case "CHATHISTORY":
			t.chatHistory = true
		case "CHANTYPES":
			t.chanTypes = value
		case "CHANMODES":
			groups := strings.SplitN(value, ",", 4)
			var cm [4]string
			copy(cm[:], groups)
			t.chanModes = cm
		case "CASEMAPPING":
			t.caseMap = strings.ToLower(value)
		case "NICKLEN", "MAXNICKLEN":
			n := 0
			for _, r := range value {
				if r < '0' || r > '9' {
					n = 0
					break
				}
				n = n*10 + int(r-'0')
				if n > 1000 {
					break
				}
			}
			if n > t.nickLen {
				t.nickLen = n
			}
		}
	}
}

// setAccount records nick's services account as the server spelt it: "*"
// (or nothing) is no account. Only nicks in our channels are kept: of the
// others the server tells nothing more.
func (t *tracker) setAccount(nick, account string) {
	if account == "*" {
		account = ""
	}
	k := t.fold(nick)
	for _, c := range t.channels {
		if c.members[k] != nil {
			t.accounts[k] = account
			return
		}
	}
}

// forgetAccounts drops the accounts of nicks no longer in any of our
// channels (the server stops telling about them).
func (t *tracker) forgetAccounts() {
	for k := range t.accounts {
		in := false
		for _, c := range t.channels {
			if c.members[k] != nil {
				in = true
				break
			}
		}
		if !in {
			delete(t.accounts, k)
		}
	}
}

// accountsTold reports whether the server tells accounts at all on this
// connection.
func (t *tracker) accountsTold() bool {
	return t.extendedJoin || t.accountNotify || t.accountTag
}

// Account returns nick's services account ("" when not logged in) and
// whether it is known: false when the server tells no accounts, or has
// not told this nick's yet (it was in the channel before the bot and has
// not spoken since, and no ACCOUNT line came).
func (t *tracker) Account(nick string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.accountsTold() {
		return "", false
	}
	a, ok := t.accounts[t.fold(nick)]
	return a, ok
}

// NicksOf returns the nicks in our channels the server told are logged
// into account (compared in the server's case mapping), sorted; none when
// the server tells no accounts.
func (t *tracker) NicksOf(account string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.accountsTold() || account == "" {
		return nil
	}
	want := t.fold(account)
	var out []string
	for k, a := range t.accounts {
		if t.fold(a) != want {
			continue
		}
		for _, c := range t.channels {
			if m := c.members[k]; m != nil {
				out = append(out, m.nick)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// whoxToken marks the bot's WHOX queries (WHO #chan %tna,TOKEN), so that
// a reply to someone else's query is never taken for ours.
const whoxToken = "417"

// AccountsByWho reports whether a WHO on joining a channel would tell its
// members' accounts: the server has WHOX and tells accounts at all.
func (t *tracker) AccountsByWho() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.whox && t.accountsTold()
}

// syncPresence gives a presence id to every nick in our channels that has
// none and drops the ids of nicks in none; mu held.
func (t *tracker) syncPresence() {
	in := map[string]bool{}
	for _, c := range t.channels {
		for k := range c.members {
			in[k] = true
		}
	}
	for k := range t.presence {
		if !in[k] {
			delete(t.presence, k)
			t.ended = append(t.ended, k)
		}
	}
	for k := range in {
		if _, ok := t.presence[k]; !ok {
			t.presence[k] = presenceID()
		}
	}
}

// takeEnded returns the folded nicks whose presence ended since the last
// call (onMessage drains it after every line).
func (t *tracker) takeEnded() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.ended
	t.ended = nil
	return e
}

// presenceID is a fresh presence id: random, so that no two nodes or
// connections ever give the same one.
func presenceID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Presence returns the id of nick's present stay in our channels, "" when
// it is in none.
func (t *tracker) Presence(nick string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.presence[t.fold(nick)]
}

// BotMode returns the server's bot user mode, "" when it has none.
// ChatHistory reports whether the server advertises CHATHISTORY.
func (t *tracker) ChatHistory() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.chatHistory
}

func (t *tracker) BotMode() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.botMode
}
