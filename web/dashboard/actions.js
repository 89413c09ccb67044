// Acting from the dashboard (doc/web.md, Signing in and acting). A
// signed-in user (!login in IRC sends the link) gets an "act" button on
// each job and "Ignore…" entries in the log's right-click menu. Each
// action is the IRC command it stands for, run by the bot as that nick
// with the rank it has in the job's channel now; the bot's reply is shown
// here and the channel sees "NICK (web): …".
"use strict";

const ACT = { session: null };

// The actions and their fields, as the server names them.
const ACTIONS = [
	["ignore", "!ig: add an ignore pattern", [["pattern", "pattern (a Python regular expression)"]]],
	["abort", "!abort", []],
	["delay", "!delay: ms between requests", [["min", "min ms"], ["max", "max ms"]]],
	["concurrency", "!con: workers", [["n", "1-99"]]],
	["explain", "!explain: attach a note", [["note", "note"]]],
	["ignorereports", "!ignorereports", [["on", "on or off"]]],
	["fail", "!fail (ops)", []],
	["move", "!move (ops): front, back or a queue", [["to", "front, back, pending:NAME…"]]],
];

function sessionBar() {
	let bar = document.getElementById("session");
	if (!bar) {
		bar = el("span", { id: "session" });
		const nav = document.querySelector("nav.top");
		if (nav) nav.append(bar);
	}
	return bar;
}

// loadSession reads /session and then tells the page ("archivebot-session"
// on document), so the pending page can show its queue controls.
async function loadSession() {
	await readSession();
	document.dispatchEvent(new Event("archivebot-session"));
}

async function readSession() {
	let r;
	try {
		r = await fetch("/session", { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" });
	} catch (_) { return; }
	if (r.status === 404) return; // sign-in is off on this node
	const bar = sessionBar();
	if (r.status === 401) {
		ACT.session = null;
		document.body.classList.remove("signed-in");
		bar.replaceChildren(el("span", { class: "muted", title: "type !login in the channel, or to the bot in private: it sends you a one-time link" }, "to act on jobs: !login in IRC"));
		return;
	}
	if (!r.ok) return;
	ACT.session = await r.json();
	document.body.classList.add("signed-in");
	bar.replaceChildren(
		el("span", { id: "signed-in-as" }, "signed in as ", el("b", {}, ACT.session.nick),
			ACT.session.account ? ` (account ${ACT.session.account})` : ""),
		" ", el("button", { id: "signout", onclick: signOut }, "Sign out"));
	if (!ACT.session.leader) {
		bar.append(" ", el("span", { id: "standby", class: "bad" },
			"this node is a standby: actions run on the leader" + (ACT.session.leader_node ? ` (${ACT.session.leader_node})` : "")));
	}
}

async function signOut() {
	if (!ACT.session) return;
	await fetch("/logout", { method: "POST", credentials: "same-origin",
		headers: { "X-CSRF-Token": ACT.session.csrf, "Content-Type": "application/x-www-form-urlencoded" }, body: "" });
	await loadSession();
	closeAct();
}

// The action dialog: one at a time, fixed at the bottom right.
const dialog = el("div", { id: "act", class: "hidden" });
document.body.append(dialog);

function closeAct() { dialog.classList.add("hidden"); }

function openAct(ident, action, values) {
	if (!ACT.session) return;
	const select = el("select", { id: "act-action" },
		ACTIONS.map(([name, label]) => el("option", { value: name, selected: name === action }, label)));
	const fieldsEl = el("div", { class: "act-fields" });
	const result = el("div", { id: "act-result" });
	const send = el("button", { id: "act-send", type: "submit" }, "Send");
	const form = el("form", { id: "act-form" },
		el("div", { class: "act-title" }, "Act on ", el("code", {}, ident), " as ", el("b", {}, ACT.session.nick),
			el("button", { type: "button", class: "act-close", onclick: closeAct }, "×")),
		select, fieldsEl, send, result);
	const draw = () => {
		const spec = ACTIONS.find((a) => a[0] === select.value);
		fieldsEl.replaceChildren(...spec[2].map(([name, ph]) =>
			el("input", { name, id: `act-${name}`, placeholder: ph, value: (values && values[name]) || "", spellcheck: "false", size: name === "pattern" || name === "note" ? 60 : 12 })));
	};
	select.addEventListener("change", draw);
	draw();
	form.addEventListener("submit", async (ev) => {
		ev.preventDefault();
		const body = new URLSearchParams({ ident });
		for (const i of fieldsEl.querySelectorAll("input")) body.set(i.name, i.value);
		send.disabled = true;
		result.className = "";
		result.textContent = "sending…";
		try {
			const r = await fetch(`/actions/${select.value}`, { method: "POST", credentials: "same-origin",
				headers: { "X-CSRF-Token": ACT.session.csrf, Accept: "application/json" }, body });
			const j = await r.json();
			if (!r.ok) {
				result.className = "bad";
				result.textContent = j.error || `HTTP ${r.status}`;
				if (r.status === 401) loadSession();
			} else {
				result.className = j.replies.some((t) => /^Sorry/.test(t)) ? "bad" : "ok";
				result.replaceChildren(el("div", { class: "muted" }, `${j.command} (in ${j.channel}, your rank there: ${j.rank})`),
					...j.replies.map((t) => el("div", { class: "reply" }, t)),
					j.unsaid ? el("div", { class: "muted" }, j.unsaid) : "");
			}
		} catch (e) {
			result.className = "bad";
			result.textContent = `failed: ${e.message}`;
		}
		send.disabled = false;
	});
	dialog.replaceChildren(form);
	dialog.classList.remove("hidden");
	const first = fieldsEl.querySelector("input");
	(first || send).focus();
}

// Job headers carry an "act" button (dashboard.js); shown when signed in.
document.addEventListener("click", (ev) => {
	const b = ev.target.closest && ev.target.closest("button.act");
	if (b) openAct(b.dataset.ident, "ignore");
});

// The right-click menu (common.js) offers "Ignore…" for the !ig lines.
window.actOnIgnore = (ident, pattern) => {
	if (!ACT.session) return false;
	openAct(ident, "ignore", { pattern });
	return true;
};
window.actSignedIn = () => !!ACT.session;

document.addEventListener("DOMContentLoaded", loadSession);
if (document.readyState !== "loading") setTimeout(loadSession, 0);
