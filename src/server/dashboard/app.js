// packrat's live dashboard: polls dashboard/state (JSON) every second and
// draws the machine's cores (coloured by the instance running on them), each
// model's plan and instances, live charts of the last minutes, the profile
// and the plan as SVG, and the reconfiguration timeline.
//
// Text from the server (model names, reasons, plan specs) is untrusted: it
// goes into the page through textContent and setAttribute only, never as
// markup. The page loads nothing from anywhere but its own server (the
// server's Content-Security-Policy enforces it).
"use strict";

const POLL_MS = 1000;
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#a0cbe8"];

// ---- DOM helpers: text only through textContent ----

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const k in attrs) e.setAttribute(k, String(attrs[k]));
  return e;
}

function svgText(x, y, text, cls, anchor) {
  const t = svg("text", {x: x, y: y, "text-anchor": anchor || "start"});
  if (cls) t.setAttribute("class", cls);
  t.textContent = String(text);
  return t;
}

function fmtMs(v) {
  if (v === null || v === undefined) return "\u2013";
  if (v === 0) return "0";
  if (v < 1) return axisNum(v * 1000) + " \u00b5s";
  return (v >= 100 ? v.toFixed(0) : v.toFixed(2)) + " ms";
}

// Three significant digits at most, no exponent for the ranges shown here.
function axisNum(v) {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1000) return v.toFixed(0);
  return String(Number(v.toPrecision(3)));
}

function fmtNum(v) {
  if (v === null || v === undefined) return "\u2013";
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toFixed(2);
}

function fmtDuration(s) {
  s = Math.max(0, Math.floor(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + (s % 60) + "s";
}

function fmtTime(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString([], {hour12: false});
}

// A colour for instance k of a model, after the instances of the models
// before it.
function instanceColor(k, nInstancesBefore) {
  return PALETTE[(nInstancesBefore + k) % PALETTE.length];
}

// ---- charts ----

// The smallest "nice" number (1, 2, 5 x 10^k) at or above v.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 2, 5, 10]) if (f * p >= v) return f * p;
  return 10 * p;
}

// A line chart of one or more series over time. spec: {title, unit, series:
// [{name, color, values}], start (unix ms of the first value), step (ms),
// markers: [{t, label}], kind}. Returns a <figure>.
function lineChart(spec) {
  const W = 420, H = 150, L = 44, R = 8, T = 8, B = 22;
  const fig = el("figure", "chart");
  fig.setAttribute("data-chart", spec.kind);
  const n = Math.max(0, ...spec.series.map(s => s.values.length));
  let max = 0, points = 0;
  for (const s of spec.series)
    for (const v of s.values) if (v !== null && v !== undefined) max = Math.max(max, v);
  max = niceCeil(max);
  const x = i => L + (n > 1 ? (i * (W - L - R)) / (n - 1) : 0);
  const y = v => T + (H - T - B) * (1 - v / max);
  const g = svg("svg", {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img"});
  g.appendChild(svg("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "plot"}));
  for (const f of [0, 0.5, 1]) {
    g.appendChild(svg("line", {x1: L, x2: W - R, y1: y(f * max), y2: y(f * max), class: "grid"}));
    g.appendChild(svgText(L - 4, y(f * max) + 4, axisNum(f * max), "axis", "end"));
  }
  const span = n > 1 ? ((n - 1) * spec.step) / 1000 : 0;
  g.appendChild(svgText(L, H - 6, "-" + fmtDuration(span), "axis"));
  g.appendChild(svgText(W - R, H - 6, "now", "axis", "end"));
  for (const mk of spec.markers || []) {
    const i = (mk.t - spec.start) / spec.step;
    if (!(i >= 0 && i <= n - 1)) continue;
    const line = svg("line", {x1: x(i), x2: x(i), y1: T, y2: H - B, class: "marker"});
    const tip = svg("title", {});
    tip.textContent = mk.label;
    line.appendChild(tip);
    g.appendChild(line);
  }
  for (const s of spec.series) {
    let run = [];
    const flush = () => {
      if (run.length > 1)
        g.appendChild(svg("polyline", {points: run.join(" "), stroke: s.color, class: "line"}));
      else if (run.length === 1) {
        const [px, py] = run[0].split(",");
        g.appendChild(svg("circle", {cx: px, cy: py, r: 1.5, fill: s.color}));
      }
      run = [];
    };
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) return flush();
      run.push(x(i).toFixed(1) + "," + y(v).toFixed(1));
      points++;
    });
    flush();
  }
  fig.setAttribute("data-points", points);
  const cap = el("figcaption", null, spec.title);
  for (const s of spec.series) {
    const key = el("span", "key", s.name);
    key.style.borderColor = s.color;
    cap.appendChild(key);
  }
  fig.appendChild(cap);
  fig.appendChild(g);
  return fig;
}

// latency[t][b] of the profile: latency against batch (log2 axis), one line
// per thread count, the active plan's instances as dots.
function profileChart(model, colors) {
  const p = model.profile;
  const W = 420, H = 200, L = 48, R = 60, T = 8, B = 26;
  const fig = el("figure", "chart");
  fig.setAttribute("data-chart", "profile");
  const bs = p.batches, ts = p.threads;
  let max = 0, points = 0;
  for (const row of p.latency_ms) for (const v of row) if (v !== null) max = Math.max(max, v);
  for (const inst of model.instances) if (inst.predicted_ms) max = Math.max(max, inst.predicted_ms);
  max = niceCeil(max);
  const lb = bs.map(b => Math.log2(b)), lo = Math.min(...lb), hi = Math.max(...lb);
  const x = b => L + (hi > lo ? ((Math.log2(b) - lo) * (W - L - R)) / (hi - lo) : 0);
  const y = v => T + (H - T - B) * (1 - v / max);
  const g = svg("svg", {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img"});
  g.appendChild(svg("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "plot"}));
  for (const f of [0, 0.5, 1])
    g.appendChild(svgText(L - 4, y(f * max) + 4, axisNum(f * max), "axis", "end"));
  for (const b of bs) g.appendChild(svgText(x(b), H - 10, b, "axis", "middle"));
  g.appendChild(svgText((L + W - R) / 2, H - 1, "batch", "axis", "middle"));
  ts.forEach((t, i) => {
    const shade = `hsl(210, 45%, ${70 - (40 * i) / Math.max(1, ts.length - 1)}%)`;
    const pts = [];
    p.latency_ms[i].forEach((v, j) => {
      if (v === null) return;
      pts.push(x(bs[j]).toFixed(1) + "," + y(v).toFixed(1));
      points++;
    });
    if (pts.length) g.appendChild(svg("polyline", {points: pts.join(" "), stroke: shade, class: "line"}));
    const last = p.latency_ms[i].length - 1;
    if (p.latency_ms[i][last] !== null && (i === 0 || i === ts.length - 1 || ts.length <= 6))
      g.appendChild(svgText(W - R + 4, y(p.latency_ms[i][last]) + 4, t + " thr", "axis"));
  });
  model.instances.forEach((inst, k) => {
    if (!inst.predicted_ms) return;
    const dot = svg("circle", {cx: x(inst.batch), cy: y(inst.predicted_ms), r: 4,
                               fill: colors[k], class: "plan-dot"});
    const tip = svg("title", {});
    tip.textContent = `instance ${k}: ${inst.threads} threads x batch ${inst.batch}`;
    dot.appendChild(tip);
    g.appendChild(dot);
  });
  fig.setAttribute("data-points", points);
  fig.appendChild(el("figcaption", null,
                     "Profile (ms): latency per batch, one line per thread count; dots: the plan"));
  fig.appendChild(g);
  return fig;
}

// The active plan: per instance, its cores (width) and its predicted and
// measured latency (bars).
function planChart(model, colors) {
  const W = 420, H = 170, L = 48, R = 8, T = 8, B = 34;
  const fig = el("figure", "chart");
  fig.setAttribute("data-chart", "plan");
  const insts = model.instances;
  let max = model.plan && model.plan.predicted_ms ? model.plan.predicted_ms : 0;
  for (const i of insts) max = Math.max(max, i.predicted_ms || 0, i.measured_ms || 0);
  max = niceCeil(max);
  const y = v => T + (H - T - B) * (1 - v / max);
  const g = svg("svg", {viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img"});
  g.appendChild(svg("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "plot"}));
  for (const f of [0, 0.5, 1])
    g.appendChild(svgText(L - 4, y(f * max) + 4, axisNum(f * max), "axis", "end"));
  const slot = (W - L - R) / Math.max(1, insts.length), bw = Math.min(28, slot / 3);
  let bars = 0;
  insts.forEach((inst, k) => {
    const cx = L + slot * (k + 0.5);
    if (inst.predicted_ms) {
      g.appendChild(svg("rect", {x: cx - bw, y: y(inst.predicted_ms), width: bw,
                                 height: H - B - y(inst.predicted_ms), class: "predicted",
                                 stroke: colors[k]}));
      bars++;
    }
    if (inst.measured_ms) {
      g.appendChild(svg("rect", {x: cx, y: y(inst.measured_ms), width: bw,
                                 height: H - B - y(inst.measured_ms), fill: colors[k],
                                 class: "measured"}));
      bars++;
    }
    g.appendChild(svgText(cx, H - B + 13, `#${k} ${inst.threads}x${inst.batch}`, "axis", "middle"));
  });
  g.appendChild(svgText(L, H - 4, "bars: predicted (outline) and measured (filled), per batch run",
                        "axis"));
  fig.setAttribute("data-points", bars);
  fig.appendChild(el("figcaption", null, "Plan (ms): latency of one batch per instance"));
  fig.appendChild(g);
  return fig;
}

// ---- the page's parts ----

function renderCores(state, owners, shares) {
  const box = document.getElementById("cores");
  box.replaceChildren();
  const mach = state.machine;
  mach.cpus.forEach((cpu, i) => {
    const cell = el("div", "core");
    cell.setAttribute("data-cpu", cpu);
    const core = mach.core_of[i], thread = mach.thread_of[i];
    let where = core === null ? "" : ` \u00b7 core ${core}`;
    if (thread) where += ` \u00b7 thread ${thread + 1}`;
    cell.appendChild(el("span", "core-id", "CPU " + cpu + where));
    const list = owners.get(cpu) || [];
    cell.setAttribute("data-owners", list.map(o => o.label).join(";"));
    // the joint plan: the model whose share holds this core (outlined in
    // its first instance's colour), even while the core idles
    const share = shares.get(cpu);
    if (share) {
      cell.setAttribute("data-share", share.name);
      cell.style.outline = `3px solid ${share.color}`;
      cell.title = `${share.name}'s share of the cores`;
    }
    if (!list.length) cell.appendChild(el("span", "idle", share ? `idle (${share.name})` : "idle"));
    for (const o of list) {
      const bar = el("span", "owner", o.label);
      bar.style.background = o.color;
      cell.appendChild(bar);
    }
    box.appendChild(cell);
  });
}

function renderLegend(models, colorsOf) {
  const box = document.getElementById("legend");
  box.replaceChildren();
  models.forEach(m => {
    (colorsOf.get(m) || []).forEach((c, k) => {
      const item = el("span", "legend-item", `${m.name} #${k}`);
      item.style.borderColor = c;
      box.appendChild(item);
    });
  });
}

function instanceTable(model, colors) {
  const table = el("table", "instances");
  const head = el("tr");
  for (const h of ["instance", "threads", "batch", "cores", "predicted", "measured", "runs"])
    head.appendChild(el("th", null, h));
  table.appendChild(head);
  model.instances.forEach((inst, k) => {
    const tr = el("tr");
    tr.setAttribute("data-instance", k);
    tr.setAttribute("data-cores", inst.cores.join(","));
    const first = el("td");
    const sw = el("span", "swatch");
    sw.style.background = colors[k];
    first.appendChild(sw);
    first.appendChild(document.createTextNode("#" + k));
    tr.appendChild(first);
    tr.appendChild(el("td", null, inst.threads));
    tr.appendChild(el("td", null, inst.batch));
    tr.appendChild(el("td", "cores-cell", inst.cores.join(", ")));
    tr.appendChild(el("td", null, fmtMs(inst.predicted_ms)));
    const meas = el("td", null, fmtMs(inst.measured_ms));
    if (inst.measured_ms === null && inst.measured_any_ms !== null)
      meas.textContent = "(" + fmtMs(inst.measured_any_ms) + ", smaller batches)";
    tr.appendChild(meas);
    tr.appendChild(el("td", null, inst.runs));
    table.appendChild(tr);
  });
  return table;
}

function timeline(model) {
  const box = el("div", "timeline");
  box.appendChild(el("h3", null, `Reconfigurations (${model.switches_total} in all, newest first)`));
  const list = el("ol", "switches");
  for (const s of model.switches.slice().reverse()) {
    const li = el("li", "switch");
    li.setAttribute("data-why", s.why);
    li.appendChild(el("time", null, fmtTime(s.unix_ms)));
    li.appendChild(el("span", "from", s.from || "(none)"));
    li.appendChild(el("span", "arrow", "\u2192"));
    li.appendChild(el("span", "to", s.to));
    li.appendChild(el("span", "why", s.why));
    if (s.duration_ms > 0) li.appendChild(el("span", "muted", `${s.duration_ms.toFixed(2)} ms`));
    list.appendChild(li);
  }
  box.appendChild(list);
  return box;
}

function liveCharts(model) {
  const s = model.series, box = el("div", "charts");
  const markers = model.switches.map(w => ({t: w.unix_ms, label: `${w.from} \u2192 ${w.to}: ${w.why}`}));
  const base = {start: s.start_unix_ms, step: 1000 * s.interval_s, markers: markers};
  box.appendChild(lineChart(Object.assign({kind: "rate", title: "Requests per second",
    series: [{name: "arrived", color: "#4e79a7", values: s.rate},
             {name: "failed", color: "#e15759", values: s.failed}]}, base)));
  const lat = [{name: "p50", color: "#59a14f", values: s.p50_ms},
               {name: "p99", color: "#f28e2b", values: s.p99_ms}];
  box.appendChild(lineChart(Object.assign({kind: "latency", title: "Latency (ms)", series: lat}, base)));
  box.appendChild(lineChart(Object.assign({kind: "queue", title: "Queue depth",
    series: [{name: "max in the second", color: "#b07aa1", values: s.queue}]}, base)));
  return box;
}

function summary(model) {
  const p = el("p", "summary");
  const s = model.series, n = s.rate.length;
  const parts = [
    ["plan", model.plan ? model.plan.spec : "\u2013"],
    ["batch", model.plan ? model.plan.batch : "\u2013"],
    ["predicted", model.plan ? fmtMs(model.plan.predicted_ms) : "\u2013"],
    ["autoscale", model.autoscale ? "on" : "off"],
    ["precision", model.precision || "fp32"],
    ["queue", `${model.queue_depth} / ${model.queue_capacity}`],
    ["requests/s", n ? fmtNum(s.rate[n - 1]) : "\u2013"],
    [`p50 (${s.summary_s} s)`, fmtMs(s.summary_p50_ms)],
    [`p99 (${s.summary_s} s)`, fmtMs(s.summary_p99_ms)],
  ];
  for (const [k, v] of parts) {
    const item = el("span", "kv");
    item.appendChild(el("b", null, k + " "));
    item.appendChild(document.createTextNode(String(v)));
    p.appendChild(item);
  }
  p.querySelector(".kv").setAttribute("data-plan", model.plan ? model.plan.spec : "");
  return p;
}

function prepared(model) {
  const box = el("p", "prepared");
  box.appendChild(el("b", null, "prepared plans "));
  for (const c of model.prepared) {
    const shape = c.bucket ? `, shape bucket <= ${c.bucket}` : "";
    const tag = el("span", c.active ? "plan active" : "plan", `${c.spec} (${fmtMs(c.predicted_ms)}${shape})`);
    box.appendChild(tag);
  }
  return box;
}

function renderModel(model, colors) {
  const card = el("section", "card model");
  card.setAttribute("data-model", model.name);
  const h = el("h2");
  h.appendChild(el("span", "name", model.name));
  h.appendChild(el("span", "muted", " version " + model.version + " "));
  h.appendChild(el("span", "state state-" + model.state.toLowerCase(), model.state));
  card.appendChild(h);
  if (model.state !== "READY") {
    card.appendChild(el("p", "reason", model.reason || "not ready"));
    return card;
  }
  card.appendChild(summary(model));
  card.appendChild(instanceTable(model, colors));
  card.appendChild(prepared(model));
  card.appendChild(liveCharts(model));
  const plots = el("div", "charts");
  if (model.profile) plots.appendChild(profileChart(model, colors));
  plots.appendChild(planChart(model, colors));
  card.appendChild(plots);
  card.appendChild(timeline(model));
  return card;
}

function render(state) {
  const srv = state.server, mach = state.machine;
  document.getElementById("server").textContent =
      `${srv.name} ${srv.version} \u00b7 up ${fmtDuration(mach.uptime_s)}`;
  document.getElementById("cpu").textContent =
      `${mach.cpu} \u00b7 ${mach.physical_cores} physical cores \u00b7 ` +
      `${mach.cpus.length} CPUs used, in the order plans take them`;
  const owners = new Map(), colorsOf = new Map(), shares = new Map();
  let before = 0;
  state.models.forEach(m => {
    const colors = m.instances.map((_, k) => instanceColor(k, before));
    before += m.instances.length;
    colorsOf.set(m, colors);
    if (m.share && m.share.divided)
      for (const cpu of m.share.cores) shares.set(cpu, {name: m.name, color: colors[0]});
    m.instances.forEach((inst, k) => {
      for (const cpu of inst.cores) {
        if (!owners.has(cpu)) owners.set(cpu, []);
        owners.get(cpu).push({label: `${m.name} #${k}`, color: colors[k]});
      }
    });
  });
  renderCores(state, owners, shares);
  renderLegend(state.models, colorsOf);
  document.getElementById("empty").hidden = state.models.length > 0;
  const box = document.getElementById("models");
  box.replaceChildren(...state.models.map(m => renderModel(m, colorsOf.get(m))));
}

function setStatus(text, ok) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = ok ? "status ok" : "status error";
}

/* A server started with --auth-token-file wants a bearer token for the
 * state: opened as /#token=TOKEN, the page keeps it for this tab
 * (sessionStorage) and takes it out of the address bar. */
function bearerToken() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("packrat-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("packrat-token");
}

async function poll() {
  try {
    const token = bearerToken();
    const headers = token ? {Authorization: "Bearer " + token} : {};
    const r = await fetch("dashboard/state", {cache: "no-store", headers});
    if (r.status === 401) throw new Error("this server needs a token: open the dashboard as /#token=TOKEN");
    if (!r.ok) throw new Error("HTTP " + r.status);
    const state = await r.json();
    render(state);
    document.body.setAttribute("data-updated", state.server.unix_ms);
    setStatus("live \u00b7 " + fmtTime(state.server.unix_ms), true);
  } catch (e) {
    setStatus("no answer from the server (" + e.message + "); retrying", false);
  }
  setTimeout(poll, POLL_MS);
}

poll();
