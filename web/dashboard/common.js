// Shared helpers of the dashboard pages (plain JS, no build step).
"use strict";

function el(tag, attrs, ...children) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (k === "class") e.className = v;
		else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
		else if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
	}
	for (const c of children.flat(Infinity)) {
		if (c === null || c === undefined || c === false) continue;
		e.append(c instanceof Node ? c : String(c));
	}
	return e;
}

// safeURL returns url when it is an absolute http(s) URL, the only kind
// that may become a live link; null for anything else (javascript:, data:,
// vbscript:, relative or unparsable), which pages show as plain text.
// Pipelines write the URLs: they are untrusted.
function safeURL(url) {
	if (typeof url !== "string" || !/^https?:\/\//i.test(url)) return null;
	try {
		const u = new URL(url);
		return u.protocol === "http:" || u.protocol === "https:" ? url : null;
	} catch (_) {
		return null;
	}
}

// link is a live link to url when safeURL allows it, otherwise the same
// text in a span of the same class.
function link(url, attrs) {
	const text = url === null || url === undefined ? "" : String(url);
	const href = safeURL(text);
	return href ? el("a", { ...(attrs || {}), href }, text) : el("span", { ...(attrs || {}), title: "not an http(s) URL: not a link" }, text);
}

async function getJSON(path) {
	const r = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
	if (!r.ok) {
		let msg = `${r.status}`;
		try { msg = (await r.json()).error || msg; } catch (_) { /* not JSON */ }
		const err = new Error(`${path}: ${msg}`);
		err.status = r.status;
		throw err;
	}
	return r.json();
}

function num(v) { const n = Number(v); return Number.isFinite(n) ? n : 0; }
function commas(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
function mb(bytes) { return (num(bytes) / 1e6).toFixed(1); }
function when(secs) {
	if (secs === null || secs === undefined || secs === "") return "";
	const d = new Date(num(secs) * 1000);
	return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
// clock is the time of day of a Date in UTC, as every time on the pages
// is (when() writes "YYYY-MM-DD hh:mm:ssZ").
function clock(d) {
	return d.toISOString().slice(11, 19) + "Z";
}
function ago(secs) {
	const s = Math.max(0, Date.now() / 1000 - num(secs));
	if (s < 120) return `${Math.round(s)} s ago`;
	if (s < 7200) return `${Math.round(s / 60)} min ago`;
	if (s < 172800) return `${Math.round(s / 3600)} h ago`;
	return `${Math.round(s / 86400)} days ago`;
}

function nav(active) {
	const links = [["/", "Live logs"], ["/pipelines", "Pipelines"], ["/pending", "Pending"], ["/finished", "Finished"]];
	return el("nav", { class: "top" },
		el("span", { class: "brand" }, "ArchiveBot"),
		links.map(([href, text]) => href === active ? el("b", {}, text) : el("a", { href }, text)),
		el("span", { class: "status", id: "status" }, ""));
}

function setStatus(text, bad) {
	const s = document.getElementById("status");
	if (!s) return;
	s.textContent = text;
	s.classList.toggle("bad", !!bad);
}

// Regexp-escape as dashboard.js does for !ig suggestions.
function reEscape(s) {
	return String(s).replace(/([-()\[\]{}+?*.$\^|,:#<!\\])/g, "\\$1").replace(/\\-/g, "-");
}

// The commands a right-click on a log URL suggests, as upstream's dashboard.
function suggestions(ident, url) {
	const scheme = url.split(":")[0];
	const host = url.split("/")[2] || "";
	let path = "/" + url.split("?")[0].split("/").slice(3).join("/");
	const re = scheme.startsWith("http") ? "https?" : "ftp";
	const paths = [path];
	path = path.replace(/\/$/, "");
	while (path && path.lastIndexOf("/") !== -1) {
		path = path.replace(/\/[^/]*$/, "");
		paths.push(path + "/");
	}
	return paths.slice(-8).map((p) => `!ig ${ident} ^${re}://${reEscape(host + p)}`)
		.concat([`!d ${ident} 180000 180000`, `!d ${ident} 250 375`, `!con ${ident} 1`]);
}

function copyText(text) {
	if (navigator.clipboard && window.isSecureContext) {
		return navigator.clipboard.writeText(text);
	}
	const t = el("textarea", {}, text);
	document.body.append(t);
	t.select();
	document.execCommand("copy");
	t.remove();
	return Promise.resolve();
}

// A right-click menu on log URLs: copy the URL or an IRC command.
function installMenu() {
	const menu = el("div", { id: "menu" });
	document.body.append(menu);
	const hide = () => { menu.style.display = "none"; };
	document.addEventListener("click", hide);
	document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") hide(); });
	document.addEventListener("wheel", hide, { passive: true });
	document.addEventListener("contextmenu", (ev) => {
		const a = ev.target.closest(".log a");
		if (!a) { hide(); return; }
		ev.preventDefault();
		const ident = a.closest("[data-ident]").dataset.ident;
		const url = a.textContent;
		const cmds = suggestions(ident, url);
		// Signed in (actions.js): each !ig line can be sent from here,
		// its pattern editable first.
		const act = window.actSignedIn && window.actSignedIn() ? cmds.filter((c) => c.startsWith("!ig ")).map((c) => {
			const pattern = c.split(" ").slice(2).join(" ");
			return el("div", { class: "cmd act-ig", onclick: () => window.actOnIgnore(ident, pattern) }, `Ignore… ${pattern}`);
		}) : [];
		// replaceChildren takes nodes, not arrays (an array would show as
		// "[object HTMLDivElement],…"): spread them.
		menu.replaceChildren(
			...(act.length ? [el("div", { class: "title" }, "Act (you can edit before sending):")] : []), ...act,
			el("div", { class: "title" }, "Copy to paste into IRC:"),
			el("div", { onclick: () => copyText(url) }, "Copy link address"),
			...cmds.map((c) => el("div", { class: "cmd", onclick: () => copyText(c) }, c)));
		menu.style.display = "block";
		menu.style.left = `${Math.min(ev.clientX, innerWidth - menu.offsetWidth - 4)}px`;
		menu.style.top = `${Math.min(ev.clientY, innerHeight - menu.offsetHeight - 4)}px`;
	});
}

// httpReasons are the reason phrases of the codes a crawl meets most.
const httpReasons = {
	200: "OK", 201: "Created", 204: "No Content", 206: "Partial Content",
	301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
	408: "Request Timeout", 410: "Gone", 429: "Too Many Requests", 451: "Unavailable For Legal Reasons",
	500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
};

// outcomeText is the word after a download's response code. Upstream's
// pipeline sends wget_code "OK" whenever wpull itself met no error, for a
// 404 or a 500 too ("404 OK"): then the code's reason phrase is shown;
// an error of wpull's (NETWORK_ERROR, …) is shown as it is.
function outcomeText(code, wgetCode) {
	const w = wgetCode === undefined || wgetCode === null ? "" : String(wgetCode);
	if (w === "OK" || w === "") return httpReasons[code] || (w || "");
	return w;
}

// Renders one log entry as a line element (null for nothing to show),
// with upstream's colours.
function logLine(e) {
	if (e.type === "download") {
		let cls = "line-normal";
		const code = num(e.response_code);
		if (e.is_warning === true || e.is_warning === "true") cls = "line-warning";
		else if (e.is_error === true || e.is_error === "true") cls = "line-error";
		else if (code >= 300 && code < 400) cls = "line-redirect";
		return el("div", { class: cls }, `${e.response_code} ${outcomeText(code, e.wget_code)} `, link(e.url, { rel: "noreferrer" }));
	}
	if (e.type === "ignore") {
		return el("div", { class: "line-ignore" }, e.source ? `IGNOR (${e.source}): ` : "IGNOR ",
			link(e.url, { rel: "noreferrer" }), el("b", {}, " by "), String(e.pattern));
	}
	if (e.type === "stdout") {
		const msg = String(e.message || "").replace(/[\r\n]+$/, "");
		if (!msg) return null;
		return el("div", { class: "line-stdout" }, msg);
	}
	return null;
}
