// Skiff models web app: progressive enhancement of the server-rendered pages.
// Live index rows (server-sent events), the create form and YAML upload, canary buttons, delete,
// streamed logs and metrics charts (SVG). Mutating calls carry the CSRF cookie in X-XSRF-TOKEN.
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
  source.addEventListener("failure", (event) => showError(event.data));
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
  const canary = $(".canary");
  if (canary) {
    const setCanary = async (percent) => {
      try {
        await call("PATCH", canary.dataset.api, JSON.stringify({ canaryTrafficPercent: percent }));
        location.reload();
      } catch (error) { showError(error.message); }
    };
    $("#promote").addEventListener("click", () => setCanary(null));
    $("#rollback").addEventListener("click", () => setCanary(0));
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

function chart(panel) {
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.dataset.panel = panel.id;
  const caption = document.createElement("figcaption");
  caption.textContent = panel.title + " (" + panel.unit + ")";
  figure.appendChild(caption);
  const width = 360, height = 150, left = 44, bottom = 18;
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": panel.title });
  const points = panel.series.flatMap((s) => s.points);
  figure.dataset.points = String(points.length);
  if (points.length === 0) {
    const empty = svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" });
    empty.textContent = "no data yet";
    plot.appendChild(empty);
  } else {
    const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]));
    const top = Math.max(...points.map((p) => p[1])) || 1;
    const x = (t) => left + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (width - left - 4);
    const y = (v) => height - bottom - (v / top) * (height - bottom - 8);
    plot.appendChild(svg("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" }));
    const label = svg("text", { x: left - 4, y: 12, "text-anchor": "end", class: "tick" });
    label.textContent = top >= 100 ? top.toFixed(0) : top.toPrecision(2);
    plot.appendChild(label);
    panel.series.forEach((series, i) => {
      const d = series.points.map((p, j) => (j ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      plot.appendChild(svg("path", { d, fill: "none", stroke: COLOURS[i % COLOURS.length], "stroke-width": 1.5 }));
    });
  }
  figure.appendChild(plot);
  const legend = document.createElement("div");
  legend.className = "legend";
  panel.series.forEach((series, i) => {
    const item = document.createElement("span");
    item.className = "c" + (i % COLOURS.length);
    const last = series.points.length ? series.points[series.points.length - 1][1] : 0;
    item.textContent = series.label + ": " + (Math.round(last * 100) / 100);
    legend.appendChild(item);
  });
  figure.appendChild(legend);
  return figure;
}

function charts() {
  const box = $("#charts");
  if (!box) return;
  const draw = async () => {
    try {
      const panels = await call("GET", box.dataset.metrics);
      box.replaceChildren(...panels.map(chart));
      box.dataset.updated = String(Date.now());
    } catch (error) { showError(error.message); }
  };
  draw();
  setInterval(draw, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  namespaceSelector();
  liveIndex();
  createPage();
  detailPage();
});
