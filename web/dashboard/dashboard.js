// The live dashboard: every running job's log, fed by /stream?v=2.
// It subscribes only to the jobs on screen, so hundreds of running jobs
// stay smooth; job events (started, finished, aborted, failed) come for
// every job and are never dropped by the server.
"use strict";

const HISTORY = 500; // log lines kept per job
// The page stays bounded: a job that ended (finished, aborted, failed)
// stays for endedKeepS seconds, and at most maxEnded ended jobs are kept
// (the oldest go first); events about jobs the page never showed create
// nothing. Tests set window.dashboardConfig before the page loads.
const CFG = Object.assign({ endedKeepS: 600, maxEnded: 50 }, window.dashboardConfig || {});

const S = {
	jobs: new Map(), // ident -> job
	ws: null,
	backoff: 1000,
	onScreen: new Set(),
	sentSubs: null,
	errorsOnly: false,
	filter: null,
	lines: 0,
	dropped: 0,
	relayDropped: 0,
	connected: false,
	// started: the running jobs were read (the page may say none runs).
	started: false,
	// Log history (/logs/recent) is loaded after the stream said hello, so
	// nothing written in between is lost; stream entries that come first
	// wait in buffer (at most BUFFER), and each job shows an entry only
	// when its score is above the last it showed (no duplicates).
	historyLoaded: false,
	buffer: [],
};
const BUFFER = 5000;

const main = el("main", { id: "main" });
const list = el("div", { id: "jobs" });
const filterBox = el("input", { id: "filter", type: "search", size: 40, placeholder: "filter: regexp on URL or nick", spellcheck: "false" });
const errorsBox = el("input", { id: "errors-only", type: "checkbox" });
// The viewers' filters: by starter nick, hiding ended jobs; all of them
// (with the regexp and errors-only) are kept in the URL, so a view can be
// shared, and one button resets them.
const nickBox = el("input", { id: "nick-filter", type: "search", size: 14, placeholder: "started by (nick)", spellcheck: "false" });
const hideBox = el("input", { id: "hide-ended", type: "checkbox" });
const countEl = el("span", { id: "num-jobs", class: "muted" }, "");

document.body.prepend(nav("/"),
	// The layout is in style.css (.toolbar): the pages' CSP refuses
	// style attributes, which left the bar unstyled.
	el("div", { class: "toolbar" },
		filterBox,
		el("button", { id: "show-all", onclick: () => setFilter("") }, "All"),
		el("button", { id: "show-none", onclick: () => setFilter("^$") }, "None"),
		nickBox,
		el("label", { for: "hide-ended", title: "hide finished, aborted and failed jobs" }, hideBox, " hide ended"),
		el("label", { for: "errors-only" }, errorsBox, " errors only"),
		el("button", { id: "reset-filters", onclick: () => resetFilters() }, "Reset filters"),
		countEl,
		el("span", { class: "help" }, el("kbd", {}, "j"), "/", el("kbd", {}, "k"), " next/previous job, ",
			el("kbd", {}, "a"), " all, ", el("kbd", {}, "n"), " none, ", el("kbd", {}, "f"), " filter; hover a log to pause it; right-click a URL for !ig")),
	main);
// Shown when no job is on the page: why (none is running), where ended
// jobs are (Finished), and which job ended last, so that a page opened
// after a short job is not just empty.
const lastEndedEl = el("p", { id: "last-ended", hidden: true });
const emptyEl = el("div", { id: "empty", class: "muted", hidden: true },
	el("p", {}, "No job is running now. A job shows here, with its log live, while a pipeline runs it; ",
		"queued jobs are on ", el("a", { href: "/pending" }, "Pending"), ", jobs that ended on ",
		el("a", { href: "/finished" }, "Finished"), " (the last 48 hours)."),
	lastEndedEl);
main.append(emptyEl, list);
installMenu();

// ---- jobs -----------------------------------------------------------

const observer = new IntersectionObserver((items) => {
	for (const it of items) {
		const id = it.target.dataset.ident;
		if (it.isIntersecting) S.onScreen.add(id); else S.onScreen.delete(id);
	}
	scheduleSubscribe();
}, { rootMargin: "300px" });

function jobState(d) {
	if (d.failed === true || d.failed === "true") return "failed";
	if (d.finished_at && d.finished_at !== "null") return d.aborted === true || d.aborted === "true" ? "aborted" : "finished";
	return null;
}

function getJob(ident, data) {
	let j = S.jobs.get(ident);
	if (!j) {
		j = { ident, data: {}, state: "running", paused: false, lines: 0 };
		j.url = el("a", { class: "url" }, "");
		j.stats = el("span", { class: "stats" }, "");
		j.stateEl = el("span", { class: "state" }, "");
		j.log = el("div", { class: "log", onmouseenter: () => pause(j, true), onmouseleave: () => pause(j, false) });
		j.el = el("section", { class: "job state-running", id: `job-${ident}`, "data-ident": ident },
			el("div", { class: "job-header" }, j.url, j.stats, j.stateEl,
				el("button", { class: "act", "data-ident": ident, title: "act on this job (signed in: !login)" }, "act"),
				el("a", { class: "ident", href: `/jobs/${ident}`, title: "this job's page (permalink)" }, ident)),
			j.log);
		S.jobs.set(ident, j);
		list.prepend(j.el);
		observer.observe(j.el);
		applyFilterTo(j);
		updateCount();
	}
	if (data) {
		Object.assign(j.data, data);
		renderHeader(j);
		const st = jobState(j.data);
		if (st) setState(j, st);
	}
	return j;
}

function renderHeader(j) {
	const d = j.data;
	if (d.url) {
		j.url.textContent = d.url;
		// Only http(s) URLs become links (a pipeline writes the URL).
		const href = safeURL(String(d.url));
		if (href) j.url.href = href; else j.url.removeAttribute("href");
	}
	const total = ["r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk"].reduce((a, k) => a + num(d[k]), 0);
	const secs = Math.max(1, Date.now() / 1000 - num(d.started_at));
	const parts = [];
	if (d.started_at) parts.push(`on ${when(d.started_at).slice(5, 10)}`);
	if (d.started_by) parts.push(`by ${d.started_by}`);
	if (d.note && String(d.note).trim() && d.note !== "null") {
		parts.push(`(${d.note})`);
		// The note also titles the job (a tooltip over its URL and header).
		j.url.title = j.el.title = `note: ${d.note}`;
	}
	let s = parts.join(" ");
	s += `; ${mb(d.bytes_downloaded)} MB in ${commas(total)} resp. at ${(total / secs).toFixed(1)}/s`;
	if (d.items_queued !== undefined) s += `, ${commas(num(d.items_queued) - num(d.items_downloaded))} in q.`;
	if (d.concurrency !== undefined && d.concurrency !== null) {
		const dmin = num(d.delay_min), dmax = num(d.delay_max);
		s += `; ${d.concurrency} con. w/ ${dmin === dmax ? dmin : `${dmin}-${dmax}`} ms delay`;
	}
	const igoff = d.suppress_ignore_reports === true || d.suppress_ignore_reports === "true";
	s += igoff ? "; igoff" : "; igon";
	j.stats.textContent = s;
	j.stats.title = ["1xx", "2xx", "3xx", "4xx", "5xx"].map((k) => `${k}: ${commas(num(d["r" + k]))}`).join("\n") + `\nUnknown: ${commas(num(d.runk))}`;
}

function setState(j, state, reason) {
	if (j.state === state && !reason) return;
	j.state = state;
	if (state === "running") delete j.endedAt;
	else if (j.endedAt === undefined) { j.endedAt = Date.now(); setTimeout(pruneEnded, 0); }
	j.el.className = `job state-${state}` + (j.el.classList.contains("hidden") ? " hidden" : "");
	if (hideBox.checked) applyFilterTo(j);
	j.stateEl.textContent = state === "running" ? "" : state;
	if (reason) j.stateEl.title = reason;
	// The reason comes with the event and again with the job's record
	// (fillJob, a resync): its line is shown once.
	if (reason && state === "failed" && j.failReason !== reason) {
		j.failReason = reason;
		appendEntries(j, [{ type: "stdout", message: `job failed: ${reason}` }]);
	}
}

// removeJob takes a job off the page and out of every structure.
function removeJob(j) {
	observer.unobserve(j.el);
	j.el.remove();
	S.jobs.delete(j.ident);
	S.onScreen.delete(j.ident);
	updateCount();
	scheduleSubscribe();
}

// pruneEnded removes ended jobs older than CFG.endedKeepS, and the oldest
// ended jobs beyond CFG.maxEnded.
function pruneEnded() {
	const now = Date.now();
	const ended = [...S.jobs.values()].filter((j) => j.endedAt !== undefined).sort((a, b) => a.endedAt - b.endedAt);
	let over = ended.length - CFG.maxEnded;
	for (const j of ended) {
		if (over > 0 || now - j.endedAt >= CFG.endedKeepS * 1000) {
			removeJob(j);
			over--;
		}
	}
}

function pause(j, on) {
	j.paused = on;
	j.log.classList.toggle("paused", on);
	if (!on) trimAndScroll(j);
}

function trimAndScroll(j) {
	while (j.lines > HISTORY && j.log.firstChild) {
		j.log.firstChild.remove();
		j.lines--;
	}
	j.log.scrollTop = j.log.scrollHeight;
}

function appendEntries(j, entries) {
	const frag = document.createDocumentFragment();
	let n = 0;
	for (const e of entries) {
		if (typeof e.score === "number") {
			if (j.maxScore !== undefined && e.score <= j.maxScore) continue; // shown already
			j.maxScore = e.score;
		}
		const line = logLine(e);
		if (!line) continue;
		frag.append(line);
		n++;
		if (e.type === "stdout") {
			const m = String(e.message);
			// Upstream's stdout lines, for jobs whose events were missed.
			if (/^Finished RsyncUpload for Item/m.test(m)) setState(j, "finished");
			else if (/Script requested immediate stop|^Adjusted target WARC path to.*-aborted$/m.test(m)) setState(j, "aborted");
			else if (/^Received item /m.test(m) && j.state !== "running") setState(j, "running");
		}
	}
	if (!n) return;
	j.log.append(frag);
	j.lines += n;
	S.lines += n;
	if (!j.paused) trimAndScroll(j);
}

// ---- filter and keys ------------------------------------------------

function applyFilterTo(j) {
	const d = j.data;
	const nick = nickBox.value.trim().toLowerCase();
	const show = (!S.filter || S.filter.test(d.url || "") || (d.started_by && S.filter.test(d.started_by))) &&
		(!nick || String(d.started_by || "").toLowerCase() === nick) &&
		!(hideBox.checked && j.state !== "running");
	j.el.classList.toggle("hidden", !show);
}

// syncURL keeps the filters in the address bar (replaceState: no history
// entry per keystroke).
function syncURL() {
	const q = new URLSearchParams();
	if (filterBox.value) q.set("filter", filterBox.value);
	if (nickBox.value.trim()) q.set("nick", nickBox.value.trim());
	if (hideBox.checked) q.set("hide", "ended");
	if (errorsBox.checked) q.set("errors", "1");
	const qs = q.toString();
	history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
}

function resetFilters() {
	nickBox.value = "";
	hideBox.checked = false;
	if (errorsBox.checked) {
		errorsBox.checked = false;
		S.errorsOnly = false;
		send({ errors_only: false });
	}
	setFilter("");
}

// The filters a shared URL carries.
(() => {
	const q = new URLSearchParams(location.search);
	filterBox.value = q.get("filter") || "";
	nickBox.value = q.get("nick") || "";
	hideBox.checked = q.get("hide") === "ended";
	errorsBox.checked = S.errorsOnly = q.get("errors") === "1";
	try { S.filter = filterBox.value ? new RegExp(filterBox.value) : null; } catch (_) { S.filter = null; }
})();

function applyFilter() {
	let shown = 0;
	for (const j of S.jobs.values()) {
		applyFilterTo(j);
		if (!j.el.classList.contains("hidden")) shown++;
	}
	main.classList.toggle("single", shown === 1);
	updateCount();
	scheduleSubscribe();
	syncURL();
}

function setFilter(v) {
	filterBox.value = v;
	onFilterInput();
}

function onFilterInput() {
	try {
		S.filter = filterBox.value ? new RegExp(filterBox.value) : null;
		filterBox.style.outline = "";
	} catch (_) {
		filterBox.style.outline = "2px solid #d33";
		return;
	}
	applyFilter();
}
filterBox.addEventListener("input", onFilterInput);

errorsBox.addEventListener("change", () => {
	S.errorsOnly = errorsBox.checked;
	send({ errors_only: S.errorsOnly });
	syncURL();
});
nickBox.addEventListener("input", applyFilter);
hideBox.addEventListener("change", applyFilter);

function visibleJobs() {
	return [...list.children].map((e) => S.jobs.get(e.dataset.ident)).filter((j) => !j.el.classList.contains("hidden"));
}

function showNext(step) {
	const all = [...list.children].map((e) => S.jobs.get(e.dataset.ident));
	if (!all.length) return;
	const vis = visibleJobs();
	let i = vis.length === 1 ? all.indexOf(vis[0]) + step : (step > 0 ? 0 : all.length - 1);
	i = (i + all.length) % all.length;
	setFilter(`^${reEscape(all[i].data.url || "")}$`);
}

document.addEventListener("keydown", (ev) => {
	if (ev.ctrlKey || ev.altKey || ev.metaKey || ev.target.tagName === "INPUT") return;
	if (ev.key === "j") showNext(1);
	else if (ev.key === "k") showNext(-1);
	else if (ev.key === "a") setFilter("");
	else if (ev.key === "n") setFilter("^$");
	else if (ev.key === "f") { ev.preventDefault(); filterBox.focus(); filterBox.select(); }
});

function updateCount() {
	let running = 0;
	for (const j of S.jobs.values()) if (j.state === "running") running++;
	countEl.textContent = `${running} running, ${S.jobs.size} shown`;
	updateEmpty();
}

// updateEmpty shows #empty while no job is on the page (once the running
// jobs were read), with the job that ended last from /finished, read
// once each time the page becomes empty.
// The node indexes a job as ended once it has taken the pipeline's finish
// notice, a moment after the job ended: while /finished has none, it is
// asked again every 5 s (the page's 1-second tick calls this).
let lastEndedAsked = 0;
function updateEmpty() {
	const empty = S.started && S.jobs.size === 0;
	emptyEl.hidden = !empty;
	if (!empty) {
		lastEndedAsked = 0;
		lastEndedEl.hidden = true;
		return;
	}
	if (lastEndedAsked && (!lastEndedEl.hidden || Date.now() - lastEndedAsked < 5000)) return;
	lastEndedAsked = Date.now();
	getJSON("/finished").then((r) => {
		if (!Array.isArray(r) || !r.length) return;
		const j = r[r.length - 1];
		const state = j.failed ? "failed" : j.aborted ? "was aborted" : "finished";
		lastEndedEl.replaceChildren("The last job to end: ", link(j.url), ` ${state} at ${when(j.finished_at)} (`,
			el("a", { href: `/jobs/${j.ident}` }, j.ident), ").");
		lastEndedEl.hidden = false;
	}).catch(() => {});
}

// ---- the stream -----------------------------------------------------

let subTimer = null;
function scheduleSubscribe() {
	if (subTimer) return;
	subTimer = setTimeout(() => {
		subTimer = null;
		const ids = [...S.onScreen].filter((id) => {
			const j = S.jobs.get(id);
			return j && !j.el.classList.contains("hidden");
		}).sort();
		const key = ids.join(",");
		if (key !== S.sentSubs && send({ subscribe: ids })) S.sentSubs = key;
	}, 200);
}

function send(msg) {
	if (S.ws && S.ws.readyState === WebSocket.OPEN) {
		S.ws.send(JSON.stringify(msg));
		return true;
	}
	return false;
}

function onFrame(f) {
	if (f.hello) {
		S.connected = true;
		S.backoff = 1000;
		S.sentSubs = null;
		send({ errors_only: S.errorsOnly });
		scheduleSubscribe();
		// Events may have been missed: while away, or, on the first
		// connection, between start()'s load of /jobs and now (a job that
		// ended then would show as running for good).
		resync();
		// Subscribed (to everything, until our subscription narrows it):
		// now the history, then what the stream sent meanwhile.
		loadHistory();
		return;
	}
	if (f.subscribed) {
		// What the server applies now (tests and the curious read it here).
		document.body.dataset.subscribed = JSON.stringify(f.subscribed);
		return;
	}
	if (f.dropped) S.dropped += f.dropped;
	// Entries of a job the leader dropped before they reached this node
	// (more than it could relay): the header counts them, and a line in
	// the job's log marks the hole (once its history is in).
	if (f.relay_dropped) {
		for (const [ident, n] of Object.entries(f.relay_dropped)) {
			S.relayDropped += num(n);
			const j = S.jobs.get(ident);
			if (!j || !S.historyLoaded) continue;
			j.log.append(el("div", { class: "line-dropped" }, `… ${commas(num(n))} lines dropped by the leader …`));
			j.lines++;
			if (!j.paused) trimAndScroll(j);
		}
	}
	if (f.events) for (const ev of f.events) onEvent(ev);
	if (f.entries && !S.historyLoaded) {
		S.buffer.push({ entries: f.entries, jobs: f.jobs }); // events and drops are counted already
		let n = S.buffer.reduce((a, b) => a + b.entries.length, 0);
		while (n > BUFFER && S.buffer.length > 1) {
			const lost = S.buffer.shift();
			n -= lost.entries.length;
			S.dropped += lost.entries.length;
		}
		return;
	}
	if (f.entries) {
		const by = new Map();
		for (const e of f.entries) {
			if (!by.has(e.ident)) by.set(e.ident, []);
			by.get(e.ident).push(e);
		}
		for (const [ident, es] of by) {
			const j = getJob(ident, f.jobs && f.jobs[ident]);
			appendEntries(j, es);
		}
	}
}

function onEvent(ev) {
	const d = ev.detail || {};
	switch (ev.event) {
	case "started": {
		const j = getJob(ev.ident, { url: d.url, started_at: ev.ts });
		setState(j, "running");
		fillJob(ev.ident);
		break;
	}
	case "finished": case "aborted": case "failed": {
		// Only for a job on the page: an event about a job it never
		// showed creates nothing (anyone can publish events).
		const j = S.jobs.get(ev.ident);
		if (!j) break;
		setState(j, ev.event, d.reason);
		updateCount();
		break;
	}
	case "settings": case "ignore_added": case "ignore_removed": case "useragent":
		if (S.jobs.has(ev.ident)) fillJob(ev.ident);
		break;
	}
}

// fillJob reads one job's record (/jobs/IDENT) into its header.
async function fillJob(ident) {
	try {
		const r = await getJSON(`/jobs/${ident}`);
		const p = r.progress || {}, s = r.settings || {};
		const data = {
			url: r.url, started_by: r.started_by, note: r.note, started_at: r.started_at,
			bytes_downloaded: p.bytes_downloaded, items_downloaded: p.items_downloaded, items_queued: p.items_queued,
			concurrency: s.concurrency, delay_min: s.delay_min, delay_max: s.delay_max,
			suppress_ignore_reports: s.suppress_ignore_reports, ...(p.responses || {}),
		};
		const j = getJob(ident, data);
		if (r.state !== "running" && r.state !== "queued") setState(j, r.state, r.failure && r.failure.reason);
	} catch (e) {
		// No such job (a "started" event nobody's job sent, or it expired):
		// a section with nothing in it goes.
		const j = S.jobs.get(ident);
		if (e.status === 404 && j && !j.lines) removeJob(j);
	}
}

// resync reloads the running jobs and the state of jobs shown as running.
async function resync() {
	try {
		const r = await getJSON("/jobs?state=running");
		const running = new Set();
		for (const it of r.jobs) {
			running.add(it.ident);
			getJob(it.ident, { url: it.url, started_by: it.started_by, note: it.note, started_at: it.started_at });
		}
		for (const j of S.jobs.values()) {
			if (j.state === "running" && !running.has(j.ident)) fillJob(j.ident);
		}
	} catch (e) {
		setStatus(`resync failed: ${e.message}`, true);
	}
}

function connect() {
	const proto = location.protocol === "https:" ? "wss:" : "ws:";
	const ws = new WebSocket(`${proto}//${location.host}/stream?v=2`);
	S.ws = ws;
	ws.onmessage = (m) => {
		try {
			onFrame(JSON.parse(m.data));
		} catch (e) {
			console.error("bad frame", e);
			document.body.dataset.error = String(e && e.stack || e);
		}
	};
	ws.onclose = (ev) => {
		S.connected = false;
		S.ws = null;
		const wait = S.backoff;
		S.backoff = Math.min(S.backoff * 2, 30000);
		setStatus(`disconnected (${ev.code}), retrying in ${Math.round(wait / 1000)} s`, true);
		setTimeout(connect, wait);
	};
}

let lastLines = 0;
setInterval(() => {
	pruneEnded();
	updateEmpty();
	if (!S.connected) return;
	const rate = S.lines - lastLines;
	lastLines = S.lines;
	setStatus(`live · ${rate} lines/s` + (S.dropped ? ` · ${commas(S.dropped)} lines dropped (too slow)` : "") +
		(S.relayDropped ? ` · ${commas(S.relayDropped)} lines dropped by the leader` : ""));
}, 1000);

// loadHistory reads the last lines of every running job (/logs/recent),
// then replays what the stream sent while it loaded; entries are shown in
// score order, each once.
async function loadHistory() {
	S.historyLoaded = false;
	try {
		const recent = await getJSON("/logs/recent?count=10");
		const by = new Map();
		for (const e of recent) {
			const id = e.job_data && e.job_data.ident;
			if (!id) continue;
			if (!by.has(id)) by.set(id, { data: e.job_data, entries: [] });
			by.get(id).entries.push(e);
		}
		for (const [id, { data, entries }] of by) {
			entries.sort((a, b) => num(a.score) - num(b.score));
			appendEntries(getJob(id, data), entries);
		}
	} catch (e) {
		setStatus(`loading the recent log failed: ${e.message}`, true);
	}
	S.historyLoaded = true;
	const frames = S.buffer;
	S.buffer = [];
	for (const f of frames) onFrame(f);
	document.body.dataset.history = "loaded";
}

async function start() {
	setStatus("loading…");
	try {
		const jobs = await getJSON("/jobs?state=running");
		for (const it of jobs.jobs) {
			getJob(it.ident, { url: it.url, started_by: it.started_by, note: it.note, started_at: it.started_at });
		}
	} catch (e) {
		setStatus(`loading failed: ${e.message}`, true);
	}
	S.started = true;
	updateEmpty();
	connect();
}

start();
