// The other pages: one job (/jobs/IDENT), pipelines, pending queues and
// finished jobs. Each reads the JSON of its own URL.
"use strict";

const path = location.pathname;
const main = el("main", { id: "main" });
const active = path.startsWith("/jobs/") ? "" : path;
document.body.prepend(nav(active), main);
installMenu();

function fail(e) {
	main.replaceChildren(el("p", { class: "error" }, String(e.message || e)));
	setStatus("error", true);
}

function kv(pairs) {
	return el("dl", { class: "kv" }, pairs.filter(([, v]) => v !== undefined).map(([k, v]) =>
		[el("dt", {}, k), el("dd", {}, v === null || v === "" ? el("span", { class: "muted" }, "—") : v)]));
}

// historyDetail is a short rendering of a history entry's detail, as
// !history shows it (bot/queue.go historyLine); plain text, never HTML.
function historyDetail(h) {
	const d = h.detail || {};
	const str = (v) => v !== null && typeof v === "object" ? JSON.stringify(v) : String(v);
	const pats = (ps) => Array.isArray(ps) ? ps.map(str).join("\n") : "";
	switch (h.event) {
	case "queued":
		return [d.channel && `in ${str(d.channel)}`, d.queue && `queue ${str(d.queue)}`].filter(Boolean).join(", ");
	case "settings":
	case "useragent": {
		const parts = [];
		if (d.set && typeof d.set === "object") {
			parts.push(Object.keys(d.set).sort().map((k) => `${k}=${str(d.set[k])}`).join(", "));
		}
		if (Array.isArray(d.del) && d.del.length) parts.push(`cleared ${d.del.map(str).join(", ")}`);
		return parts.join("; ");
	}
	case "ignore_added":
	case "ignore_removed":
		return pats(d.patterns);
	case "started":
		return d.pipeline ? `pipeline ${str(d.pipeline)}` : "";
	case "aborted":
		return d.queued ? "while queued" : d.requested ? "requested" : "";
	case "failed":
		return d.reason !== undefined ? str(d.reason) : "";
	case "moved":
		return `${str(d.from)} → ${str(d.to)}`;
	}
	return Object.keys(d).length ? JSON.stringify(d) : "";
}

// historyRow is one history entry as a table row; every cell is set with
// textContent (nicks and patterns come from IRC).
function historyRow(h) {
	const tr = document.createElement("tr");
	tr.className = `hist-${String(h.event).replace(/[^a-z_]/g, "")}`;
	for (const [cls, text] of [["when", when(h.ts)], ["event", h.event], ["by", h.by], ["detail", historyDetail(h)]]) {
		const td = document.createElement("td");
		td.className = cls;
		td.textContent = text === null || text === undefined ? "" : String(text);
		tr.append(td);
	}
	return tr;
}

async function jobPage(ident) {
	document.title = `ArchiveBot job ${ident}`;
	const r = await getJSON(`/jobs/${ident}`);
	const s = r.settings || {}, p = r.progress || {}, resp = p.responses || {};
	const log = el("div", { class: "log", id: "job-log" });
	const box = el("section", { class: `job state-${r.state === "queued" ? "running" : r.state}`, id: `job-${ident}`, "data-ident": ident },
		el("div", { class: "job-header" }, link(r.url, { class: "url" }),
			el("span", { class: "state", id: "job-state" }, r.state),
			el("a", { class: "ident", href: location.pathname }, ident)),
		log);
	// History, newest first; job events from the stream add rows live.
	const seen = new Set();
	const histKey = (h) => `${h.ts}|${h.event}|${h.by}`;
	const histBody = el("tbody", {});
	const histHead = el("h3", {}, "History");
	const histTable = el("table", { id: "history", class: "history" },
		el("thead", {}, el("tr", {}, ["time (UTC)", "event", "by", "detail"].map((h) => el("th", {}, h)))), histBody);
	const addHistory = (h) => {
		if (!h || seen.has(histKey(h))) return;
		seen.add(histKey(h));
		const row = historyRow(h);
		row.dataset.ts = num(h.ts);
		// Keep newest first even if an event arrives out of order.
		const after = [...histBody.rows].find((r) => num(r.dataset.ts) <= num(h.ts));
		histBody.insertBefore(row, after || null);
		histHead.textContent = `History (${histBody.rows.length})`;
	};
	for (const h of r.history || []) addHistory(h);
	if (!histBody.rows.length) histHead.textContent = "History (none recorded)";
	main.replaceChildren(
		el("h2", {}, "Job ", el("code", {}, ident)),
		el("p", {}, "Permalink: ", el("a", { href: location.href }, location.href)),
		kv([
			["URL", link(r.url)], ["state", r.state],
			["queue", r.queue ? `${r.queue}, position ${r.position} of ${r.queue_length}` : undefined],
			["pipeline", r.pipeline ? `${r.pipeline.nickname || ""} (${r.pipeline.id})` : undefined],
			["failure", r.failure ? [r.failure.reason, r.failure.failed_by && `by ${r.failure.failed_by}`, r.failure.failed_at && when(r.failure.failed_at)].filter(Boolean).join(", ") : undefined],
			["depth", r.depth], ["note", r.note], ["started by", `${r.started_by || ""} in ${r.started_in || ""}`],
			["queued at", when(r.queued_at)], ["started at", when(r.started_at)], ["finished at", when(r.finished_at)],
			["downloaded", `${mb(p.bytes_downloaded)} MB, ${commas(num(p.items_downloaded))} items, ${commas(num(p.items_queued) - num(p.items_downloaded))} in queue, ${commas(num(p.error_count))} errors`],
			["responses", ["r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk"].map((k) => `${k}: ${commas(num(resp[k]))}`).join(", ")],
			["delay", `${s.delay_min}–${s.delay_max} ms`], ["concurrency", s.concurrency],
			["ignore reports", s.suppress_ignore_reports ? "off (igoff)" : "on"], ["user agent", s.user_agent || "default"],
			["expires in", r.expires_in === null || r.expires_in === undefined ? null : `${r.expires_in} s`],
		]),
		el("h3", {}, `Ignore patterns (${(r.ignore_patterns || []).length})`),
		el("pre", { id: "ignores" }, (r.ignore_patterns || []).join("\n") || "none"),
		histHead, histTable,
		el("h3", {}, "Recent log"),
		box);
	const add = (entries) => {
		for (const e of entries) {
			const line = logLine(e);
			if (line) log.append(line);
		}
		while (log.childNodes.length > 500) log.firstChild.remove();
		log.scrollTop = log.scrollHeight;
	};
	// The stream first, then the recent log (so nothing written in between
	// is lost); stream entries wait until the history is in, and an entry
	// shows only when its score is above the last one shown.
	let maxScore, loaded = false, buffered = [];
	const addNew = (entries) => {
		const fresh = [];
		for (const e of entries) {
			if (typeof e.score === "number") {
				if (maxScore !== undefined && e.score <= maxScore) continue;
				maxScore = e.score;
			}
			fresh.push(e);
		}
		add(fresh);
	};
	const loadHistory = async () => {
		loaded = false;
		try {
			const rec = (await getJSON("/logs/recent?count=10")).filter((e) => e.job_data && e.job_data.ident === ident);
			rec.sort((a, b) => num(a.score) - num(b.score));
			addNew(rec);
		} catch (_) { /* no recent log */ }
		loaded = true;
		const b = buffered;
		buffered = [];
		addNew(b);
		document.body.dataset.history = "loaded";
	};
	const proto = location.protocol === "https:" ? "wss:" : "ws:";
	const connect = () => {
		const ws = new WebSocket(`${proto}//${location.host}/stream?v=2&jobs=${encodeURIComponent(ident)}`);
		ws.onopen = () => setStatus("live");
		ws.onmessage = (m) => {
			const f = JSON.parse(m.data);
			if (f.hello) loadHistory(); // subscribed to this job since connect
			if (f.entries) {
				const es = f.entries.filter((e) => e.ident === ident);
				if (loaded) addNew(es);
				else if (buffered.length < 5000) buffered.push(...es);
			}
			for (const ev of f.events || []) {
				if (ev.ident !== ident) continue;
				addHistory(ev);
				if (["finished", "aborted", "failed", "started"].includes(ev.event)) {
					const st = ev.event === "started" ? "running" : ev.event;
					document.getElementById("job-state").textContent = st;
					box.className = `job state-${st}`;
				}
			}
		};
		ws.onclose = () => { setStatus("disconnected, retrying", true); setTimeout(connect, 3000); };
	};
	connect();
}

async function pipelinesPage() {
	document.title = "ArchiveBot pipelines";
	const r = await getJSON("/pipelines");
	const pct = (v) => { const n = num(v); return n <= 1 ? n * 100 : n; };
	// A field the pipeline did not report (an API pipeline may send any
	// subset of upstream's) shows as a dash, never "undefined" or "0 %".
	const given = (v) => v !== undefined && v !== null && v !== "";
	const text = (v) => given(v) ? String(v) : "—";
	const rows = r.pipelines.map((p) => {
		const mem = given(p.mem_usage) ? pct(p.mem_usage) : null, disk = given(p.disk_usage) ? pct(p.disk_usage) : null;
		const share = (v) => v === null ? "—" : `${v.toFixed(0)} %`;
		const load = [p.load_average_1m, p.load_average_5m, p.load_average_15m];
		const silent = Date.now() / 1000 - num(p.ts) > 300;
		return el("tr", { class: silent ? "hi" : "" },
			el("td", {}, text(p.nickname)), el("td", {}, text(p.hostname)), el("td", {}, text(p.version)),
			el("td", { class: "num" + (mem > 90 ? " hi" : "") }, share(mem)),
			el("td", { class: "num" + (disk > 90 ? " hi" : "") }, share(disk)),
			el("td", { class: "num" }, load.some(given) ? load.map(text).join(" ") : "—"),
			el("td", { class: silent ? "hi" : "" }, p.ts ? ago(p.ts) : "never"),
			el("td", {}, p.status || ""), el("td", { class: "muted" }, p.id));
	});
	main.replaceChildren(el("h2", {}, `Pipelines (${rows.length})`),
		el("p", { class: "help" }, "Highlighted: memory or disk over 90 %, or no report for 5 minutes."),
		el("table", { id: "pipelines" }, el("tr", {}, ["nickname", "host", "version", "memory", "disk", "load", "last report", "status", "id"].map((h) => el("th", {}, h))), rows));
}

async function pendingPage() {
	document.title = "ArchiveBot pending";
	const [r, st] = await Promise.all([getJSON("/jobs?state=queued"), getJSON("/status")]);
	const byQueue = new Map();
	for (const j of r.jobs) {
		if (!byQueue.has(j.queue)) byQueue.set(j.queue, []);
		byQueue.get(j.queue).push(j);
	}
	const parts = [el("h2", {}, `Pending (${r.jobs.length})`), el("p", { class: "help" }, "Queues in the order pipelines check them; next to run first.")];
	// Paused queues (doc/protocol.md, Paused queues): who, when, why.
	const paused = Object.entries(st.paused || {}).sort(([a], [b]) => a.localeCompare(b));
	if (paused.length) {
		parts.push(el("div", { class: "paused", id: "paused" }, paused.map(([q, p]) =>
			el("p", {}, `${q === "all" ? "Every queue is" : "Queue " + q + " is"} paused by ${p.by} since ${new Date(p.at * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC${p.reason ? " (" + p.reason + ")" : ""}: no pipeline gets its jobs until !resume.`))));
	}
	parts.push(queueControls(st, byQueue));
	for (const [q, jobs] of byQueue) {
		parts.push(el("h3", {}, `${q} (${jobs.length})`),
			el("table", { class: "pending" }, el("tr", {}, ["#", "URL", "ident", "by", "queued"].map((h) => el("th", {}, h))),
				jobs.map((j) => el("tr", {}, el("td", { class: "num" }, j.position), el("td", {}, link(j.url)),
					el("td", {}, el("a", { href: `/jobs/${j.ident}` }, j.ident)), el("td", {}, j.started_by || ""), el("td", {}, ago(j.queued_at))))));
	}
	if (!r.jobs.length) parts.push(el("p", {}, "Nothing is pending."));
	main.replaceChildren(...parts);
}

// The reply of the last pause or resume, kept across redraws.
const queueResult = el("div", { id: "queue-result" });

// queueControls is, for a signed-in user (actions.js), a Pause or Resume
// button per queue and for all, with a reason box: POST /actions/pause
// or /actions/resume, which the bot runs as !pause / !resume in its first
// channel, with the rank it sees there now (doc/web.md, Signing in and
// acting). The command's reply shows below; the page then redraws.
function queueControls(st, byQueue) {
	const paused = st.paused || {};
	const names = new Set(["pending", "pending-ao", "pending-large",
		...Object.keys(st["pending-others-details"] || {}), ...byQueue.keys(), ...Object.keys(paused)]);
	names.delete("all");
	const queues = ["all", ...[...names].sort((a, b) => a.localeCompare(b))];
	const send = async (action, queue, reason, button) => {
		if (!ACT.session) return;
		const body = new URLSearchParams({ queue });
		if (reason) body.set("reason", reason);
		button.disabled = true;
		queueResult.className = "";
		queueResult.textContent = "sending…";
		try {
			const r = await fetch(`/actions/${action}`, { method: "POST", credentials: "same-origin",
				headers: { "X-CSRF-Token": ACT.session.csrf, Accept: "application/json" }, body });
			const j = await r.json();
			if (!r.ok) {
				queueResult.className = "bad";
				queueResult.textContent = j.error || `HTTP ${r.status}`;
			} else {
				queueResult.className = j.replies.some((t) => /^Sorry/.test(t)) ? "bad" : "ok";
				queueResult.replaceChildren(el("div", { class: "muted" }, `${j.command} (in ${j.channel}, your rank there: ${j.rank})`),
					...j.replies.map((t) => el("div", { class: "reply" }, t)),
					j.unsaid ? el("div", { class: "muted" }, j.unsaid) : "");
			}
		} catch (e) {
			queueResult.className = "bad";
			queueResult.textContent = `failed: ${e.message}`;
		}
		button.disabled = false;
		try { await pendingPage(); } catch (e) { fail(e); }
	};
	const rows = queues.map((q) => {
		const reason = el("input", { class: "queue-reason", "data-queue": q, placeholder: "reason (optional)", size: 30, spellcheck: "false" });
		let button;
		if (paused[q]) {
			button = el("button", { class: "queue-resume", "data-queue": q, type: "button" }, "Resume");
			button.addEventListener("click", () => send("resume", q, "", button));
		} else {
			button = el("button", { class: "queue-pause", "data-queue": q, type: "button" }, "Pause");
			button.addEventListener("click", () => send("pause", q, reason.value.trim(), button));
		}
		return el("tr", {}, el("td", {}, q === "all" ? "all (every queue)" : q),
			el("td", {}, paused[q] ? "paused" : "handing out"),
			el("td", {}, paused[q] ? "" : reason), el("td", {}, button));
	});
	return el("details", { class: "queue-actions", id: "queue-actions", open: true },
		el("summary", {}, "Pause or resume a queue (ops; runs !pause / !resume as you in the bot's first channel)"),
		el("table", {}, rows), queueResult);
}

async function finishedPage() {
	document.title = "ArchiveBot finished";
	const r = await getJSON("/finished");
	r.reverse(); // newest first
	const state = (j) => j.failed ? "failed" : j.aborted ? "aborted" : "finished";
	main.replaceChildren(el("h2", {}, `Finished in the last 48 hours (${r.length})`),
		el("table", { id: "finished" }, el("tr", {}, ["finished", "state", "URL", "ident", "by", "MB", "responses", "reason"].map((h) => el("th", {}, h))),
			r.map((j) => el("tr", { class: `state-${state(j)}` },
				el("td", {}, when(j.finished_at)), el("td", {}, state(j)), el("td", {}, link(j.url)),
				el("td", {}, el("a", { href: `/jobs/${j.ident}` }, j.ident)), el("td", {}, j.started_by || ""),
				el("td", { class: "num" }, mb(j.bytes_downloaded)),
				el("td", { class: "num" }, commas(["r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk"].reduce((a, k) => a + num(j[k]), 0))),
				el("td", {}, j.failed_reason || "")))));
}

// recentPage is /logs/recent in a browser: each running job's last log
// entries (the JSON of the same URL), as upstream serves a page there.
async function recentPage() {
	document.title = "ArchiveBot recent logs";
	const entries = await getJSON(`/logs/recent${location.search}`);
	const jobs = new Map();
	for (const e of entries) {
		const jd = e.job_data || {};
		const id = String(jd.ident || "");
		if (!jobs.has(id)) jobs.set(id, { jd, lines: [] });
		const line = logLine(e);
		if (line) jobs.get(id).lines.push(line);
	}
	const parts = [el("h2", {}, `Recent log entries of ${jobs.size} running job${jobs.size === 1 ? "" : "s"}`),
		el("p", { class: "help" }, "The last entries of each running job (", el("code", {}, "?count=N"), ", at most 10); the live view is on ", el("a", { href: "/" }, "Live logs"), ".")];
	for (const [id, j] of jobs) {
		parts.push(el("section", { class: "job state-running", "data-ident": id },
			el("div", { class: "job-header" }, link(j.jd.url, { class: "url" }),
				el("a", { class: "ident", href: `/jobs/${encodeURIComponent(id)}` }, id)),
			el("div", { class: "log recent" }, j.lines)));
	}
	if (!jobs.size) parts.push(el("p", {}, "No job is running."));
	main.replaceChildren(...parts);
}

(async () => {
	try {
		if (path.startsWith("/jobs/")) await jobPage(decodeURIComponent(path.slice(6)));
		else if (path === "/pipelines") await pipelinesPage();
		else if (path === "/pending") await pendingPage();
		else if (path === "/finished") await finishedPage();
		else if (path === "/logs/recent") await recentPage();
		if (!path.startsWith("/jobs/")) setStatus(`loaded ${clock(new Date())}`);
	} catch (e) {
		fail(e);
	}
})();
