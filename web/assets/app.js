// Skiff models web app: progressive enhancement of the server-rendered pages.
// Live index rows (server-sent events), live detail pages (their parts fetched again), the create
// form and YAML upload, canary buttons that wait for the traffic to follow, delete, streamed logs
// and metrics charts (SVG). Mutating calls carry the CSRF cookie in X-XSRF-TOKEN.
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
      const pending = $("#pending");
      const what = percent === null ? "promote" : "canaryTrafficPercent " + percent + "%";
      const sent = Date.now();
      try {
        await call("PATCH", canary.dataset.api, JSON.stringify({ canaryTrafficPercent: percent }));
        showError("");
        pending.textContent = "Saved: " + what + ". Waiting for the traffic to follow...";
        pending.hidden = false;
        pending.dataset.state = "waiting";
        live.until(() => {
          if (trafficFollows(percent)) {
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
    out.textContent = "";
    const option = select.selectedOptions[0];
    const url = select.dataset.logs + encodeURIComponent(option.value) + "/logs?tail=500&container=" +
      encodeURIComponent(option.dataset.container);
    source = new EventSource(url);
    source.onmessage = (event) => {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.textContent += event.data + "\n";
      if (out.textContent.length > 400000) out.textContent = out.textContent.slice(-300000);
      if (atEnd) out.scrollTop = out.scrollHeight;
    };
    source.addEventListener("failure", (event) => showError(event.data));
  };
  select.addEventListener("change", follow);
  follow();
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
