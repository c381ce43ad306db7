// Skiff models web app: progressive enhancement of the server-rendered pages.
// Live index rows (server-sent events), live detail pages (their parts fetched again), the create
// form and YAML upload, canary buttons and Roll back (after a full rollout, a kept revision's spec
// restored) that wait for the traffic to follow, delete, streamed logs and metrics charts (SVG).
// Mutating calls carry the CSRF cookie in X-XSRF-TOKEN.
"use strict";

const $ = (selector, root = document) => root.querySelector(selector);

function csrfToken() {
  const match = document.cookie.split("; ").find((c) => c.startsWith("XSRF-TOKEN="));
  return match ? match.slice("XSRF-TOKEN=".length) : "";
}

function showError(message) {
  const box = $("#error");
  if (!box) return;
  box.textContent = message;
  box.hidden = !message;
}

async function call(method, url, body, contentType) {
  const headers = { "X-XSRF-TOKEN": csrfToken() };
  if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
  const response = await fetch(url, { method, headers, body, credentials: "same-origin" });
  const text = await response.text();
  let answer = null;
  try { answer = JSON.parse(text); } catch (_) { answer = { error: text }; }
  if (!response.ok) throw new Error((answer && answer.error) || response.statusText);
  return answer;
}

function namespaceSelector() {
  const select = $("#namespace");
  if (!select) return;
  select.addEventListener("change", () => {
    location.href = document.body.dataset.prefix + "/?ns=" + encodeURIComponent(select.value);
  });
}

function liveIndex() {
  const table = $("#services");
  if (!table || !window.EventSource) return;
  const source = new EventSource(table.dataset.live);
  source.addEventListener("rows", (event) => {
    $("tbody", table).innerHTML = event.data;
    showError("");
  });
  source.addEventListener("notices", (event) => {
    $("#notices").outerHTML = event.data;
  });
  source.addEventListener("failure", (event) => showError(event.data));
}

// How often an open detail page fetches itself again; faster while an action waits to take effect.
const LIVE_MS = 2000;
const WAITING_MS = 700;
// How long an action's result is waited for before the page says it has not shown yet.
const WAIT_LIMIT_MS = 60000;

// The detail page follows the service: the parts that show state (data-part) are fetched again
// (the page itself, rendered by the server) on one timer while the page is visible, and replaced
// where they changed. Returns a handle whose until(check) polls faster until check() is true
// after a refresh.
function livePage() {
  if (!$("#tab") || !window.DOMParser) return null;
  let timer = null;
  let waiters = [];
  const refresh = async () => {
    const response = await fetch(location.href, { credentials: "same-origin" });
    if (!response.ok) throw new Error("refreshing the page: " + response.status + " " + response.statusText);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const old of document.querySelectorAll("[data-part]")) {
      const next = fresh.querySelector('[data-part="' + old.dataset.part + '"]');
      if (!next || next.outerHTML === old.outerHTML) continue;
      if (old.dataset.part === "replicas") replicas(old, next);
      else old.replaceWith(document.importNode(next, true));
    }
    waiters = waiters.filter((waiter) => !waiter());
    document.body.dataset.refreshed = String(Date.now());
  };
  const schedule = (ms) => {
    if (document.hidden || timer !== null) return;
    timer = setTimeout(tick, ms === undefined ? (waiters.length ? WAITING_MS : LIVE_MS) : ms);
  };
  const tick = async () => {
    try { await refresh(); } catch (error) { showError(error.message); }
    timer = null;
    schedule();
  };
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) { clearTimeout(timer); timer = null; } else schedule(0);
  });
  schedule();
  return {
    until(check) {
      waiters.push(check);
      clearTimeout(timer);
      timer = null;
      schedule(0);
    },
  };
}

// The logs tab's replicas changed: the list is updated in place while the followed replica is
// still there; otherwise the tab is replaced and the first replica followed.
function replicas(old, next) {
  const select = $("#pod", old);
  const fresh = $("#pod", next);
  if (select && fresh && [...fresh.options].some((o) => o.value === select.value)) {
    const followed = select.value;
    select.replaceChildren(...[...fresh.options].map((o) => document.importNode(o, true)));
    select.value = followed;
  } else {
    old.replaceWith(document.importNode(next, true));
    logs();
  }
}

// Whether the revisions table shows canaryTrafficPercent `percent` (null: promoted) in effect: the
// spec holds it and the latest revision has that share (all of it when promoted or alone).
function trafficFollows(percent) {
  const canary = $("#canary");
  const rows = [...document.querySelectorAll("#revisions tr[data-revision]")];
  if (!canary || !rows.length) return false;
  const latest = rows.find((r) => r.dataset.tag === "latest") || rows[0];
  const previous = rows.find((r) => r.dataset.tag === "prev");
  const share = percent === null || !previous ? 100 : percent;
  return canary.dataset.percent === (percent === null ? "" : String(percent)) && Number(latest.dataset.percent) === share;
}

// Says that `what` was saved and waits (the live page polling faster) until check() is true
// after a refresh, then clears the note; after WAIT_LIMIT_MS it says the result has not shown.
function awaitEffect(live, what, sent, check) {
  const pending = $("#pending");
  showError("");
  pending.textContent = "Saved: " + what + ". Waiting for the traffic to follow...";
  pending.hidden = false;
  pending.dataset.state = "waiting";
  live.until(() => {
    if (check()) {
      pending.textContent = "";
      pending.hidden = true;
      pending.dataset.state = "shown";
      return true;
    }
    if (Date.now() - sent < WAIT_LIMIT_MS) return false;
    pending.textContent = "Saved: " + what + ". The traffic has not followed after " + WAIT_LIMIT_MS / 1000 + " s.";
    pending.dataset.state = "late";
    return true;
  });
}

// Whether the revisions table shows `revision` taking all traffic as the latest revision, with no
// canary set: a rollback by restoring its spec has taken effect.
function restoredShows(revision) {
  const canary = $("#canary");
  const rows = [...document.querySelectorAll("#revisions tr[data-revision]")];
  const row = rows.find((r) => r.dataset.revision === revision);
  return !!canary && canary.dataset.percent === "" && !!row && row.dataset.tag === "latest" &&
    Number(row.dataset.percent) === 100;
}

// Roll back after a full rollout: the app restores `revision`'s spec in the manifest (the fields
// that differ, in place), and the kept revision takes all traffic again.
async function restoreRevision(api, live, revision) {
  const sent = Date.now();
  try {
    await call("POST", api + "/rollback");
    awaitEffect(live, "restoring the spec of " + revision, sent, () => restoredShows(revision));
  } catch (error) { showError(error.message); }
}

function createPage() {
  const form = $("#isvc-form");
  const yamlForm = $("#yaml-form");
  if (!form || !yamlForm) return;
  const yaml = $("#yaml");
  const fields = () => Object.fromEntries(new FormData(form).entries());
  let pending = 0;
  // The form's YAML, shown in the text area; false (the error shown) if the form is refused.
  const render = async () => {
    const ticket = ++pending;
    try {
      const answer = await call("POST", form.dataset.render, JSON.stringify(fields()));
      if (ticket === pending) { yaml.value = answer.yaml; showError(""); }
      return ticket === pending;
    } catch (error) {
      if (ticket === pending) showError(error.message);
      return false;
    }
  };
  const create = async () => {
    try {
      const created = await call("POST", yamlForm.dataset.create, yaml.value, "application/yaml");
      location.href = yamlForm.dataset.details + encodeURIComponent(created.name);
    } catch (error) {
      showError(error.message);
    }
  };
  form.addEventListener("input", render);
  $("#use-form").addEventListener("click", render);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await render()) await create();
  });
  $("#yaml-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) yaml.value = await file.text();
  });
  yamlForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    await create();
  });
}

function detailPage() {
  const remove = $("#delete");
  if (remove) {
    remove.addEventListener("click", async () => {
      if (!confirm("Delete InferenceService " + remove.dataset.name + " and everything it owns?")) return;
      try {
        await call("DELETE", remove.dataset.api);
        location.href = remove.dataset.index;
      } catch (error) { showError(error.message); }
    });
  }
  const copy = $("#copy-curl");
  if (copy) {
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText($("#curl").textContent); copy.textContent = "Copied"; }
      catch (_) { copy.textContent = "Select and copy"; }
    });
  }
  const live = livePage();
  const canary = $(".canary");
  if (canary) {
    // The result shows when the status shows it, not when the change is saved.
    const setCanary = async (percent) => {
      const what = percent === null ? "promote" : "canaryTrafficPercent " + percent + "%";
      const sent = Date.now();
      try {
        await call("PATCH", canary.dataset.api, JSON.stringify({ canaryTrafficPercent: percent }));
        awaitEffect(live, what, sent, () => trafficFollows(percent));
      } catch (error) { showError(error.message); }
    };
    $("#promote").addEventListener("click", () => setCanary(null));
    // The button is replaced as the rollout moves on (data-part), so its clicks are caught here.
    canary.addEventListener("click", (event) => {
      const button = event.target.closest("#rollback");
      if (!button || button.disabled) return;
      if (button.dataset.restore) restoreRevision(canary.dataset.api, live, button.dataset.restore);
      else setCanary(0);
    });
    $("#set-canary").addEventListener("click", () => setCanary(Number($("#canary-percent").value)));
  }
  logs();
  charts();
}

function logs() {
  const select = $("#pod");
  const out = $("#logs");
  if (!select || !out || !window.EventSource) return;
  let source = null;
  const follow = () => {
    if (source) source.close();
    out.replaceChildren();
    const option = select.selectedOptions[0];
    const url = select.dataset.logs + encodeURIComponent(option.value) + "/logs?tail=500&container=" +
      encodeURIComponent(option.dataset.container);
    source = new EventSource(url);
    source.onmessage = (event) => {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.appendChild(logLine(event.data));
      while (out.childElementCount > 3000) out.firstElementChild.remove();
      if (atEnd) out.scrollTop = out.scrollHeight;
    };
    source.addEventListener("failure", (event) => showError(event.data));
  };
  select.addEventListener("change", follow);
  follow();
}

// One log line as a log viewer shows it: a JSON line (tracing's format: timestamp, level, fields
// with the message, target, spans) as time, level and message, its other fields on demand (click);
// any other line as it is.
function logLine(text) {
  let entry = null;
  try { entry = JSON.parse(text); } catch (_) { entry = null; }
  if (!entry || typeof entry !== "object" || Array.isArray(entry) || !(entry.level || entry.fields || entry.msg)) {
    const raw = document.createElement("div");
    raw.className = "log-line raw";
    raw.textContent = text;
    return raw;
  }
  const fields = Object.assign({}, entry.fields || {});
  const message = fields.message ?? entry.msg ?? entry.message ?? "";
  delete fields.message;
  for (const [key, value] of Object.entries(entry)) {
    if (!["timestamp", "time", "ts", "level", "fields", "msg", "message"].includes(key)) fields[key] = value;
  }
  const level = String(entry.level || "").toUpperCase();
  const head = document.createElement("span");
  head.className = "log-head";
  const time = document.createElement("time");
  const stamp = entry.timestamp || entry.time || entry.ts || "";
  time.dateTime = stamp;
  time.textContent = logTime(stamp);
  time.title = stamp;
  const badge = document.createElement("span");
  badge.className = "level level-" + (level.toLowerCase() || "none");
  badge.textContent = level;
  const words = document.createElement("span");
  words.className = "message";
  words.textContent = typeof message === "string" ? message : JSON.stringify(message);
  head.append(time, badge, words);
  const names = Object.keys(fields);
  const line = document.createElement(names.length ? "details" : "div");
  line.className = "log-line level-" + (level.toLowerCase() || "none");
  if (!names.length) { line.appendChild(head); return line; }
  const summary = document.createElement("summary");
  const count = document.createElement("span");
  count.className = "field-count";
  count.textContent = names.length === 1 ? "1 field" : names.length + " fields";
  summary.append(head, count);
  const list = document.createElement("dl");
  list.className = "fields";
  for (const name of names) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    const value = fields[name];
    dd.textContent = typeof value === "string" ? value : JSON.stringify(value);
    list.append(dt, dd);
  }
  line.append(summary, list);
  return line;
}

// `2026-11-26T13:20:01.123456Z` as `13:20:01.123` (local time); anything else as it is.
function logTime(stamp) {
  const date = new Date(stamp);
  if (!stamp || isNaN(date)) return stamp ? String(stamp) : "";
  const pad = (n, width) => String(n).padStart(width, "0");
  return pad(date.getHours(), 2) + ":" + pad(date.getMinutes(), 2) + ":" + pad(date.getSeconds(), 2) + "." +
    pad(date.getMilliseconds(), 3);
}

const SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  return element;
}

// A round step for about `count` ticks over `span`: 1, 2 or 5 times a power of ten.
function niceStep(span, count) {
  const raw = span / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  return step || 10 * power;
}

// A value as a tick or legend shows it: at most three significant digits, no trailing zeros.
function formatValue(value) {
  if (value === 0) return "0";
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  return String(Number(value.toFixed(digits)));
}

// Clock times between t0 and t1 (unix seconds) on round steps (10 s ... 1 h), at most 6.
function timeTicks(t0, t1) {
  const steps = [10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200];
  const step = steps.find((s) => (t1 - t0) / s <= 6) || 7200;
  const pad = (n) => String(n).padStart(2, "0");
  const ticks = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    const d = new Date(t * 1000);
    const label = pad(d.getHours()) + ":" + pad(d.getMinutes()) + (step < 60 ? ":" + pad(d.getSeconds()) : "");
    ticks.push([t, label]);
  }
  return ticks;
}

// Units counted in whole numbers get whole ticks.
const WHOLE_UNITS = ["replicas", "starts", "requests"];

// A value with its unit, a counted unit in the singular for one ("1 replica").
function withUnit(value, unit) {
  const text = formatValue(value);
  return text + " " + (text === "1" && WHOLE_UNITS.includes(unit) ? unit.slice(0, -1) : unit);
}

function chart(panel) {
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.panel = panel.id;
  const caption = document.createElement("figcaption");
  const named = panel.title.toLowerCase().includes(panel.unit);
  caption.textContent = panel.title + (named ? "" : " (" + panel.unit + ")");
  figure.appendChild(caption);
  const width = 360, height = 170, left = 66, right = 10, top = 8, bottom = 20;
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": panel.title });
  const series = panel.series.filter((s) => s.points.length > 0);
  const points = series.flatMap((s) => s.points);
  figure.dataset.points = String(points.length);
  let t0 = panel.start, t1 = panel.end;
  if (!(t1 > t0) && points.length) {
    t0 = Math.min(...points.map((p) => p[0]));
    t1 = Math.max(...points.map((p) => p[0]));
  }
  const peak = points.length ? Math.max(...points.map((p) => p[1])) : 0;
  figure.dataset.peak = String(peak);
  const whole = WHOLE_UNITS.includes(panel.unit);
  const step = Math.max(niceStep(peak > 0 ? peak : 1, 4), whole ? 1 : 0);
  const yMax = Math.max(step, Math.ceil(peak / step) * step);
  const x = (t) => left + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (width - left - right);
  const y = (v) => height - bottom - (v / yMax) * (height - bottom - top);
  for (let v = 0; v <= yMax + step / 2; v += step) {
    plot.appendChild(svg("line", { x1: left, y1: y(v), x2: width - right, y2: y(v), class: v ? "grid" : "axis" }));
    const label = svg("text", { x: left - 4, y: y(v) + 3, "text-anchor": "end", class: "tick ytick" });
    label.textContent = withUnit(v, panel.unit);
    plot.appendChild(label);
  }
  if (t1 > t0) {
    for (const [t, text] of timeTicks(t0, t1)) {
      plot.appendChild(svg("line", { x1: x(t), y1: top, x2: x(t), y2: height - bottom + 3, class: "grid" }));
      const label = svg("text", { x: x(t), y: height - 6, "text-anchor": "middle", class: "tick xtick" });
      label.textContent = text;
      plot.appendChild(label);
    }
  }
  if (points.length === 0) {
    const empty = svg("text", { x: (left + width) / 2, y: (height - bottom) / 2, "text-anchor": "middle", class: "empty" });
    empty.textContent = "no data in this window";
    plot.appendChild(empty);
  }
  series.forEach((line, i) => {
    const colour = COLOURS[i % COLOURS.length];
    // A gap much longer than the sampling step (the app was down, a scrape failed) is not bridged.
    const gaps = line.points.slice(1).map((p, j) => p[0] - line.points[j][0]).filter((d) => d > 0);
    const gap = Math.max(30, 3 * (gaps.length ? Math.min(...gaps) : 0));
    const d = line.points.map((p, j) => {
      const move = j === 0 || p[0] - line.points[j - 1][0] > gap;
      return (move ? "M" : "L") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1);
    }).join(" ");
    plot.appendChild(svg("path", { d, fill: "none", stroke: colour, "stroke-width": 1.5 }));
    if (line.points.length === 1) {
      const [p] = line.points;
      plot.appendChild(svg("circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2, fill: colour }));
    }
  });
  figure.appendChild(plot);
  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach((line, i) => {
    const item = document.createElement("span");
    item.className = "c" + (i % COLOURS.length);
    const last = line.points[line.points.length - 1][1];
    item.dataset.revision = line.label;
    item.dataset.last = String(last);
    item.textContent = line.label + ": " + withUnit(last, panel.unit);
    legend.appendChild(item);
  });
  figure.appendChild(legend);
  return figure;
}

function charts() {
  const box = $("#charts");
  if (!box) return;
  const select = $("#window");
  const draw = async () => {
    try {
      const panels = await call("GET", box.dataset.metrics + (select ? select.value : "15"));
      box.replaceChildren(...panels.map(chart));
      box.dataset.updated = String(Date.now());
    } catch (error) { showError(error.message); }
  };
  if (select) select.addEventListener("change", draw);
  draw();
  setInterval(draw, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  namespaceSelector();
  liveIndex();
  createPage();
  detailPage();
});
