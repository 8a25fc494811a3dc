// The seckill dashboard: reads /v1/dashboard/stream (one JSON frame a
// second, Server-Sent Events format) with a streamed fetch, so the admin
// token goes in the Authorization header and never into a URL or a log.
// No build step and no library: the charts are plain SVG polylines.
"use strict";

const COLORS = {
  ok: "#1f9d55", sold_out: "#8a94a6", limit_exceeded: "#e08a00", stock_moving: "#7c3aed",
  unavailable: "#d64545", rate_limited: "#a0522d", not_started: "#3182ce", ended: "#4a5568",
};
const OTHER = ["#0bc5ea", "#d53f8c", "#2c7a7b", "#744210"];
const ORDER_STATES = ["pending_payment", "paid", "cancelled", "expired"];
const $ = (sel) => document.querySelector(sel);
let running = null;

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

function fmt(n) {
  return n == null ? "–" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 });
}

function colorOf(code, i) {
  return COLORS[code] || OTHER[i % OTHER.length];
}

// A line chart of `series` ({name, color, values}) over `n` points.
function chart(kind, series, n, unit) {
  const W = 600, H = 160, L = 44, B = 16;
  let max = 0;
  for (const s of series) for (const v of s.values) max = Math.max(max, v);
  max = max > 0 ? max * 1.1 : 1;
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - 4)) / (n - 1));
  const y = (v) => H - B - (v / max) * (H - B - 8);
  const lines = series.map((s) => {
    const pts = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    return `<polyline data-series="${esc(s.name)}" fill="none" stroke="${s.color}" stroke-width="1.6" points="${pts}"/>`;
  }).join("");
  const grid = [0, 0.5, 1].map((f) => {
    const v = max * f;
    return `<line x1="${L}" x2="${W}" y1="${y(v)}" y2="${y(v)}" stroke="#e6e9ef"/>` +
      `<text x="${L - 4}" y="${y(v) + 3}" text-anchor="end">${fmt(v)}</text>`;
  }).join("");
  const axis = `<text x="${L}" y="${H - 3}">−${n} s</text><text x="${W - 4}" y="${H - 3}" text-anchor="end">now</text>`;
  const legend = series.map((s) => {
    const last = s.values.length ? s.values[s.values.length - 1] : 0;
    return `<span style="--c:${s.color}" data-legend="${esc(s.name)}">${esc(s.name)} ${fmt(last)}${unit}</span>`;
  }).join("");
  return `<svg class="chart" data-chart="${kind}" viewBox="0 0 ${W} ${H}" preserveAspectRatio="none">${grid}${axis}${lines}</svg>` +
    `<div class="legend">${legend}</div>`;
}

function numbers(pairs) {
  return `<dl class="numbers">${pairs.map(([label, field, value]) =>
    `<div><dt>${esc(label)}</dt><dd data-field="${field}">${fmt(value)}</dd></div>`).join("")}</dl>`;
}

function renderSale(sale) {
  const secs = sale.seconds || [];
  const last = secs.length ? secs[secs.length - 1] : { codes: {}, p50_ms: 0, p99_ms: 0 };
  const codes = new Set();
  for (const s of secs) for (const c of Object.keys(s.codes)) codes.add(c);
  codes.add("ok");
  const order = [...codes].sort((a, b) => (a === "ok" ? -1 : b === "ok" ? 1 : a.localeCompare(b)));
  const rates = order.map((c, i) => ({
    name: c, color: colorOf(c, i), values: secs.map((s) => s.codes[c] || 0),
  }));
  const latency = [
    { name: "p50", color: "#3182ce", values: secs.map((s) => s.p50_ms) },
    { name: "p99", color: "#d64545", values: secs.map((s) => s.p99_ms) },
  ];
  const refused = Object.entries(last.codes).filter(([c]) => c !== "ok").reduce((a, [, n]) => a + n, 0);
  // Orders as SQL holds them; unknown ("–") while SQL cannot be read.
  const orders = sale.orders ? Object.fromEntries(ORDER_STATES.map((s) => [s, sale.orders[s] || 0])) : {};
  let shards = "";
  if (sale.sharding) {
    const s = sale.sharding;
    shards = `<table data-table="shards"><tr><th>shard</th><th>stock</th><th>remaining</th><th>sold</th></tr>` +
      `<tr data-shard="pool"><td>pool</td><td></td><td>${fmt(s.pool)}</td><td></td></tr>` +
      `<tr data-shard="in_flight"><td>moving (${fmt(s.transfers)} transfers${s.drained ? ", drained" : ""})</td><td></td><td>${fmt(s.in_flight)}</td><td></td></tr>` +
      s.shards.map((sh) => `<tr data-shard="${esc(sh.id)}"><td>${esc(sh.id)}</td><td>${fmt(sh.stock)}</td>` +
        `<td>${fmt(sh.remaining)}</td><td>${fmt(sh.sold)}</td></tr>`).join("") + `</table>`;
  }
  return `<h2>${esc(sale.id)} <small>${esc(sale.name)} · <span data-field="status">${esc(sale.status)}</span></small></h2>` +
    numbers([
      ["stock", "stock", sale.stock], ["remaining", "remaining", sale.remaining], ["sold", "sold", sale.sold],
      ["purchases/s", "ok_rate", last.codes.ok || 0], ["refusals/s", "refused_rate", refused],
      ["p50 ms", "p50_ms", last.p50_ms], ["p99 ms", "p99_ms", last.p99_ms],
      ["pending", "pending_payment", orders.pending_payment], ["paid", "paid", orders.paid],
      ["cancelled", "cancelled", orders.cancelled], ["expired", "expired", orders.expired],
      ["persister backlog", "backlog", sale.backlog], ["persister lag ms", "lag_ms", sale.lag_ms],
    ]) +
    `<div class="charts"><figure><figcaption>answers per second, by code</figcaption>${chart("rates", rates, secs.length, "/s")}</figure>` +
    `<figure><figcaption>purchase latency, ms</figcaption>${chart("latency", latency, secs.length, " ms")}</figure></div>` +
    shards;
}

function render(frame) {
  const badge = (el, name, up) => {
    el.textContent = `${name}: ${up ? "reachable" : "unreachable"}`;
    el.className = `badge ${up ? "up" : "down"}`;
  };
  badge($("#redis"), "Redis", frame.redis);
  badge($("#sql"), "SQL", frame.sql);
  $("#error").textContent = "";
  $("#status").textContent = `live · ${frame.sales.length} sale(s) · updated ${new Date(frame.at_ms).toLocaleTimeString()}` +
    (frame.more_sales ? ` · ${frame.more_sales} more not shown` : "");
  // A sale Redis lost is not among the sales Redis lists: said apart.
  const lost = $("#lost");
  lost.hidden = !frame.lost_sales.length;
  lost.textContent = frame.lost_sales.length
    ? `Redis lost ${frame.lost_sales.length} live sale(s): ${frame.lost_sales.join(", ")}. ` +
      "They answer 503 sale_lost until restored from SQL: seckill audit --sale ID --repair-from-sql"
    : "";
  const main = $("#sales");
  const seen = new Set();
  for (const sale of frame.sales) {
    seen.add(sale.id);
    let el = [...main.children].find((c) => c.dataset.sale === sale.id);
    if (!el) {
      el = document.createElement("section");
      el.className = "sale";
      el.dataset.sale = sale.id;
      main.appendChild(el);
    }
    el.innerHTML = renderSale(sale);
  }
  for (const el of [...main.children]) if (!seen.has(el.dataset.sale)) el.remove();
  if (!frame.sales.length) main.innerHTML = `<p class="empty">No live sale.</p>`;
}

function refuse(message) {
  $("#error").textContent = message;
  $("#status").textContent = "";
  $("#lost").hidden = true;
  $("#sales").innerHTML = "";
}

async function follow(token, signal) {
  const res = await fetch("/v1/dashboard/stream", { headers: { Authorization: `Bearer ${token}` }, signal });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    refuse(res.status === 401
      ? `The admin token was refused: ${body.message || "unauthorized"}`
      : `The service answered ${res.status}: ${body.message || ""}`);
    return false;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return true;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) render(JSON.parse(data));
    }
  }
}

// Follows the stream, reconnecting after a dropped connection, until
// another token is entered or the token is refused.
async function connect(token) {
  if (running) running.abort();
  const control = new AbortController();
  running = control;
  $("#status").textContent = "connecting…";
  while (!control.signal.aborted) {
    let again;
    try {
      again = await follow(token, control.signal);
    } catch (e) {
      if (control.signal.aborted) return;
      again = true;
    }
    if (!again) return;
    $("#status").textContent = "connection lost; reconnecting…";
    await new Promise((r) => setTimeout(r, 1000));
  }
}

$("#login").addEventListener("submit", (e) => {
  e.preventDefault();
  connect($("#token").value);
});
// The page is ready once this listener is in place (tests wait for it).
document.body.dataset.ready = "1";
