// SPDX-License-Identifier: Apache-2.0
//
// The macake status page: polls the daemon's status once a second and
// draws each link's last ten minutes. Everything it shows comes from
// /api/status (statusapi.Status, with each link's history since the last
// sample the page has, and the last events). When the daemon lets it (the
// page then carries a token), its buttons POST pauses and resumes to
// /api/pause; it sends nothing else.
"use strict";

// TOKEN is the daemon's secret for this page, which its pause requests
// send back; null when the page is read-only.
const TOKEN = document.querySelector('meta[name="macake-token"]')?.content || null;

const WINDOW_MS = 10 * 60 * 1000;
const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
const COLUMNS = [
  "download_rate_bits_per_second", "upload_rate_bits_per_second",
  "download_achieved_bits_per_second", "upload_achieved_bits_per_second",
  "baseline_rtt_seconds", "rtt_seconds", "download_delay_seconds", "upload_delay_seconds",
];

// fmtRate mirrors shape.FormatApprox: three significant digits ("4.49
// Mbit/s", "12.0 Mbit/s", "480 Mbit/s", "950 kbit/s").
function fmtRate(bps) {
  const units = [[1e9, "Gbit/s"], [1e6, "Mbit/s"], [1e3, "kbit/s"]];
  for (let i = 0; i < units.length; i++) {
    const [div, name] = units[i];
    if (bps >= div) {
      const v = bps / div;
      if (v >= 999.5 && i > 0) return fmtRate(Math.round(v) * div);
      if (v >= 99.95) return v.toFixed(0) + " " + name;
      if (v >= 9.995) return v.toFixed(1) + " " + name;
      return v.toFixed(2) + " " + name;
    }
  }
  return Math.max(bps, 0).toFixed(0) + " bit/s";
}

// fmtLatency mirrors shape.FormatLatency, from seconds: "20.3ms", "1.25s",
// "<0.1ms".
function fmtLatency(s) {
  if (s < 0) return "-" + fmtLatency(-s);
  if (s < 0.00005) return "<0.1ms";
  if (s >= 1) return s.toFixed(2) + "s";
  return (s * 1000).toFixed(1) + "ms";
}

// fmtAge is a coarse elapsed time: "12s", "4m10s", "2h14m", "3d4h".
function fmtAge(sec) {
  sec = Math.round(sec);
  const pad = (n) => String(n).padStart(2, "0");
  if (sec < 60) return sec + "s";
  if (sec < 3600) return Math.floor(sec / 60) + "m" + pad(sec % 60) + "s";
  if (sec < 48 * 3600) return Math.floor(sec / 3600) + "h" + pad(Math.floor(sec / 60) % 60) + "m";
  return Math.floor(sec / 86400) + "d" + (Math.floor(sec / 3600) % 24) + "h";
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// histories holds each link's samples, oldest first, merged from every
// answer; since is the newest sample time the page has.
const histories = new Map();
let since = 0;

function merge(link) {
  const h = link.history;
  if (!h) return;
  let cur = histories.get(link.name);
  if (!cur) {
    cur = { times: [], cols: {} };
    for (const c of COLUMNS) cur.cols[c] = [];
    histories.set(link.name, cur);
  }
  h.times_unix_ms.forEach((t, i) => {
    if (cur.times.length && t <= cur.times[cur.times.length - 1]) return;
    cur.times.push(t);
    for (const c of COLUMNS) cur.cols[c].push(h[c][i]);
    since = Math.max(since, t);
  });
  const newest = cur.times[cur.times.length - 1];
  let drop = 0;
  while (drop < cur.times.length && cur.times[drop] < newest - WINDOW_MS) drop++;
  if (drop) {
    cur.times.splice(0, drop);
    for (const c of COLUMNS) cur.cols[c].splice(0, drop);
  }
}

function last(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}

// niceTop rounds a chart's top up to 1, 2 or 5 times a power of ten.
function niceTop(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// draw fills an SVG with the series (each {values, cls}) over the last
// ten minutes of times, from 0 to a round top, labelled with fmt.
function draw(svg, times, series, fmt) {
  const H = 170, R = 592, T = 10, B = 146;
  svg.replaceChildren();
  const now = times.length ? times[times.length - 1] : Date.now();
  let top = 0;
  for (const s of series) for (const v of s.values) if (v !== null) top = Math.max(top, v);
  top = niceTop(top * 1.05);
  const y = (v) => B - (B - T) * Math.min(v / top, 1);
  // The y labels first, measured as drawn: the plot starts right of the
  // widest ("20.0 Mbit/s" in a fixed 78-unit margin lost its first
  // digit), and they are right-aligned against it.
  const labels = [0, 0.5, 1].map((f) => {
    const label = svgEl("text", { y: y(top * f) + 4, "text-anchor": "end" });
    label.textContent = fmt(top * f);
    svg.append(label);
    return label;
  });
  let widest = 0;
  for (const label of labels) widest = Math.max(widest, label.getComputedTextLength ? label.getComputedTextLength() : 0);
  const L = Math.max(40, Math.ceil(widest) + 10);
  for (const label of labels) label.setAttribute("x", L - 6);
  const x = (t) => L + (R - L) * (1 - (now - t) / WINDOW_MS);
  for (const f of [0, 0.5, 1]) {
    svg.append(svgEl("line", { class: "grid", x1: L, x2: R, y1: y(top * f), y2: y(top * f) }));
  }
  for (const [t, text, anchor] of [[now - WINDOW_MS, "−10 min", "start"], [now - WINDOW_MS / 2, "−5 min", "middle"], [now, "now", "end"]]) {
    const label = svgEl("text", { x: x(t), y: H - 4, "text-anchor": anchor });
    label.textContent = text;
    svg.append(label);
  }
  for (const s of series) {
    let d = "", pen = "M";
    s.values.forEach((v, i) => {
      if (v === null) { pen = "M"; return; }
      d += pen + x(times[i]).toFixed(1) + " " + y(v).toFixed(1);
      pen = "L";
    });
    if (d) svg.append(svgEl("path", { class: s.cls, d: d }));
  }
}

// card returns the link's section, building it on first sight.
function card(name) {
  let c = document.querySelector(`section.link[data-link="${CSS.escape(name)}"]`);
  if (c) return c;
  const fact = (field, label) => el("div", {}, el("dt", {}, label), el("dd", { "data-field": field }, "–"));
  const figure = (kind, caption) => {
    const fig = el("figure", { "data-chart": kind });
    fig.append(svgEl("svg", { viewBox: "0 0 600 170", role: "img", "aria-label": caption }));
    fig.append(el("figcaption", { "data-field": kind + "-legend" }));
    return fig;
  };
  const counters = el("table", { class: "counters" },
    el("thead", {}, el("tr", {}, ...["shaper", "direction", "carried", "packets", "dropped", "queued", "overlimits"].map((h) => el("th", {}, h)))),
    el("tbody", { "data-field": "counters" }));
  // CAKE's tins (tc -s's table), for the tins that carried traffic.
  const tins = el("table", { class: "counters", "data-field": "tins-table", hidden: "" },
    el("thead", {}, el("tr", {}, ...["CAKE tin", "direction", "took in", "packets", "dropped", "marked", "queued", "delay avg", "peak", "flows sparse", "bulk"].map((h) => el("th", {}, h)))),
    el("tbody", { "data-field": "tins" }));
  c = el("section", { class: "link", "data-link": name },
    el("h2", { "data-field": "title" }, name),
    el("p", { class: "sub", "data-field": "sub" }),
    el("p", { class: "error", "data-field": "error", hidden: "" }),
    el("ul", { class: "advice", "data-field": "advice", hidden: "" }),
    el("dl", { class: "facts" },
      fact("state", "controller"), fact("download-rate", "download shaper"), fact("download-achieved", "download achieved"),
      fact("upload-rate", "upload shaper"), fact("upload-achieved", "upload achieved"),
      fact("baseline", "idle round trip"), fact("rtt", "round trip now")),
    el("div", { class: "charts" }, figure("download", "download rates"), figure("upload", "upload rates"), figure("delay", "round trip")),
    counters, tins);
  if (TOKEN) c.insertBefore(controls(), c.querySelector(".facts"));
  document.getElementById("links").append(c);
  return c;
}

// controls are a link's pause and resume buttons.
function controls() {
  const button = (seconds, label) => el("button", { type: "button", "data-pause": String(seconds) }, label);
  return el("div", { class: "controls" }, button(900, "Pause 15 min"), button(3600, "Pause 1 h"), button(0, "Resume"),
    el("span", { class: "result", "data-field": "control-result" }));
}

// pauseText says what a pause is: "every link until 15:04:05 (12m00s
// left; by alice)", as status prints it.
function pauseText(p) {
  const what = p.link === "*" ? "every link" : p.link;
  return `${what} until ${new Date(p.until).toLocaleTimeString()} (${fmtAge(p.remaining_seconds)} left${p.by ? "; by " + p.by : ""})`;
}

// sendPause asks the daemon to pause link ("" every link) for seconds, or
// to resume (0), and says what it answered beside the buttons.
async function sendPause(box, link, seconds) {
  const result = box.querySelector('[data-field="control-result"]');
  for (const b of box.querySelectorAll("button")) b.disabled = true;
  result.textContent = seconds ? "pausing…" : "resuming…";
  try {
    const r = await fetch("/api/pause", {
      method: "POST", cache: "no-store",
      headers: { "Content-Type": "application/json", "X-Macake-Token": TOKEN },
      body: JSON.stringify({ link: link, seconds: seconds }),
    });
    const a = await r.json();
    result.textContent = !r.ok ? "refused: " + a.error : a.pause ? "paused: " + pauseText(a.pause) : "resumed";
    result.className = "result " + (r.ok ? "ok" : "bad");
  } catch (e) {
    result.textContent = "not answering: " + e.message;
    result.className = "result bad";
  }
  for (const b of box.querySelectorAll("button")) b.disabled = false;
  refresh();
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button[data-pause]");
  const box = b?.closest("[data-link]");
  if (!b || !box || !TOKEN) return;
  sendPause(b.parentElement, box.dataset.link, Number(b.dataset.pause));
});

function setField(root, field, text) {
  const e = root.querySelector(`[data-field="${field}"]`);
  if (e && e.textContent !== text) e.textContent = text;
}

function legend(root, kind, items) {
  const e = root.querySelector(`[data-field="${kind}-legend"]`);
  e.replaceChildren(...items.map(([cls, label, value]) =>
    el("span", {}, el("span", { class: "key " + cls }), label + " ", el("b", {}, value))));
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? n + " B" : v.toPrecision(3) + " " + units[i];
}

function renderLink(l) {
  const c = card(l.name);
  const ctl = l.controller;
  setField(c, "sub", `${l.interface} · ${l.mode}${ctl && !ctl.shaping && l.mode === "balanced" ? " (released)" : ""} · profile ${l.profile_key}`);
  const err = c.querySelector('[data-field="error"]');
  err.hidden = !l.error;
  setField(c, "error", l.error ? l.error.message : "");
  // What the daemon's history says of the bounds, with the edit to make.
  const advice = c.querySelector('[data-field="advice"]');
  const items = (l.advice || []).map((a) => el("li", {}, a.message + ". In " + a.file + " set ", el("code", {}, a.edit)));
  advice.hidden = items.length === 0;
  if (advice.textContent !== items.map((i) => i.textContent).join("")) advice.replaceChildren(...items);
  const shaper = (dir) => l.shapers.find((s) => s.direction === dir);
  for (const dir of ["download", "upload"]) {
    const s = shaper(dir);
    setField(c, dir + "-rate", l.paused_until ? "paused" : !s ? "not shaped" : s.not_shaped ? "not shaped: " + s.not_shaped : fmtRate(s.rate_bits_per_second));
    setField(c, dir + "-achieved", ctl ? `${fmtRate(ctl[dir].achieved_bits_per_second)} (${ctl[dir].load_percent}%)` : "–");
  }
  const paused = l.paused_until ? (Date.parse(l.paused_until) - Date.now()) / 1000 : null;
  let state = paused !== null ? `paused (${fmtAge(Math.max(paused, 0))} left)` : ctl ? ctl.status : l.shaped ? "static" : "not shaped";
  if (ctl && l.mode === "balanced") state += ctl.engaged ? ", engaged" : ", released";
  if (ctl && (ctl.download.bufferbloat || ctl.upload.bufferbloat)) state += ", bufferbloat";
  setField(c, "state", state);
  const h = histories.get(l.name) || { times: [], cols: Object.fromEntries(COLUMNS.map((k) => [k, []])) };
  const measured = ctl && ctl.responses > 0;
  setField(c, "baseline", measured ? fmtLatency(ctl.idle_rtt_seconds) : "–");
  const rtt = last(h.cols.rtt_seconds);
  setField(c, "rtt", measured && rtt !== null ? fmtLatency(rtt) : "–");

  const svg = (kind) => c.querySelector(`figure[data-chart="${kind}"] svg`);
  for (const dir of ["download", "upload"]) {
    const rate = h.cols[dir + "_rate_bits_per_second"], got = h.cols[dir + "_achieved_bits_per_second"];
    draw(svg(dir), h.times, [{ values: rate, cls: "shaper" }, { values: got, cls: "achieved" }], fmtRate);
    const lr = last(rate), lg = last(got);
    legend(c, dir, [["shaper", dir + " shaper", lr === null ? "–" : fmtRate(lr)], ["achieved", "achieved", lg === null ? "–" : fmtRate(lg)]]);
  }
  draw(svg("delay"), h.times, [{ values: h.cols.baseline_rtt_seconds, cls: "baseline" }, { values: h.cols.rtt_seconds, cls: "rtt" }], fmtLatency);
  const lb = last(h.cols.baseline_rtt_seconds);
  legend(c, "delay", [["baseline", "idle round trip", lb === null ? "–" : fmtLatency(lb)], ["rtt", "round trip now", rtt === null ? "–" : fmtLatency(rtt)]]);

  const rows = l.shapers.map((s) => {
    const st = s.stats;
    const cells = [s.name || "shaper", s.direction].concat(st ?
      [bytes(st.bytes), String(st.packets), String(st.drops), `${st.backlog_packets} (${bytes(st.backlog_bytes)})`, String(st.overlimits)] :
      ["–", "–", "–", "–", "–"]);
    return el("tr", {}, ...cells.map((t) => el("td", {}, t)));
  });
  c.querySelector('[data-field="counters"]').replaceChildren(...rows);
  const tinRows = l.shapers.flatMap((s) => ((s.stats && s.stats.tins) || [])
    .filter((t) => t.packets > 0 || t.drops > 0 || t.backlog_bytes > 0)
    .map((t) => el("tr", {}, ...[t.name, s.direction, bytes(t.bytes), String(t.packets), String(t.drops), String(t.ecn_marks),
      bytes(t.backlog_bytes), fmtLatency(t.average_delay_seconds), fmtLatency(t.peak_delay_seconds), String(t.sparse_flows), String(t.bulk_flows)]
      .map((v) => el("td", {}, v)))));
  c.querySelector('[data-field="tins-table"]').hidden = tinRows.length === 0;
  c.querySelector('[data-field="tins"]').replaceChildren(...tinRows);
}

function renderStatus(st) {
  const d = st.daemon;
  setField(document, "daemon", d.running ?
    `macake watch running, pid ${d.pid}, up ${fmtAge(d.uptime_seconds || 0)}${d.version ? ", version " + d.version : ""} · ${st.backend.scope || ""}` :
    "macake watch is not running: " + (d.note || ""));
  const a = st.last_apply;
  setField(document, "reconcile", a ? `last reconcile ${fmtAge((Date.now() - Date.parse(a.at)) / 1000)} ago (${a.trigger}): ${a.result.replace("_", " ")}${a.error ? ": " + a.error.message : ""}` : "");
  const pauses = st.pauses || [];
  document.getElementById("paused").hidden = pauses.length === 0;
  setField(document, "paused", pauses.length ? "Paused: " + pauses.map(pauseText).join("; ") : "");
  document.getElementById("controls").hidden = !TOKEN || !d.running;
  const names = new Set();
  for (const l of st.links) {
    names.add(l.name);
    merge(l);
    renderLink(l);
  }
  for (const c of document.querySelectorAll("section.link")) {
    if (!names.has(c.dataset.link)) { c.remove(); histories.delete(c.dataset.link); }
  }
  if (st.links.length === 0 && !document.getElementById("no-links")) {
    document.getElementById("links").append(el("p", { id: "no-links" }, "No active link: no policy matches the network now."));
  } else if (st.links.length > 0) {
    document.getElementById("no-links")?.remove();
  }
  const problems = (st.problems || []).map((p) => p.message).concat((st.config_errors || []).map((e) => `${e.file}:${e.line}:${e.column}: ${e.message}`));
  document.getElementById("problems-section").hidden = problems.length === 0;
  document.getElementById("problems").replaceChildren(...problems.map((p) => el("li", {}, p)));
  const events = (st.events || []).slice().reverse().slice(0, 15);
  document.getElementById("events").replaceChildren(...events.map((e) =>
    el("li", { class: e.level }, el("time", { datetime: e.time }, new Date(e.time).toLocaleTimeString()), e.summary)));
}

function setLive(ok, text) {
  const b = document.getElementById("live");
  b.className = "badge " + (ok ? "ok" : "bad");
  b.textContent = text;
}

// refresh asks for the status once and draws it.
async function refresh() {
  try {
    const r = await fetch("/api/status" + (since ? "?since=" + since : ""), { cache: "no-store" });
    if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
    renderStatus(await r.json());
    setLive(true, "live");
  } catch (e) {
    // The daemon stopped or restarts: say so and keep trying.
    setLive(false, "not answering: " + e.message);
  }
}

async function poll() {
  await refresh();
  setTimeout(poll, POLL_MS);
}

poll();
