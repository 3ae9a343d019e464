// slotd console: polls /api/v1/map, /api/v1/status, /api/v1/load and /api/v1/replicas (see
// docs/console.md) and draws the slot map and the tables. No framework, no
// external resources, nothing inline (the Content-Security-Policy forbids it).
"use strict";

(function () {
  const SLOTS = 16384, COLS = 128, CELL = 4;
  // Tableau 10 and more: distinct on a dark background; node i gets PALETTE[i % n].
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#17becf", "#bcbd22", "#8c564b"];
  const GREY = [90, 90, 90], NONE = [0, 0, 0];
  // The under-replicated layer: slots short of rf or of their zones stand
  // out in these colours (none of the palette's); the others are dimmed.
  const LAYER = { "under-replicated": [255, 61, 214], "below-min-isr": [255, 0, 0], "zone-violation": [255, 255, 0] };
  const DIM = 0.3;
  // Turbo-like ramp for heat: low to high.
  const RAMP = [[48, 18, 59], [70, 98, 215], [26, 228, 182], [164, 252, 60], [251, 128, 34], [122, 4, 3]];

  const state = { map: null, status: null, load: null, replicas: null, layer: false, mode: "owner", etags: {}, hover: -1 };
  const $ = (id) => document.getElementById(id);
  // willReadFrequently: the map is drawn with putImageData (no GPU work to
  // lose), and readers such as the browser tests read its pixels back.
  const canvas = $("map"), ctx = canvas.getContext("2d", { willReadFrequently: true });
  const img = ctx.createImageData(COLS * CELL, COLS * CELL);

  function hexRGB(h) { return [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)); }
  function nodeColor(i) { return i < 0 ? NONE : hexRGB(PALETTE[i % PALETTE.length]); }
  function ramp(t) {
    const x = Math.min(Math.max(t, 0), 1) * (RAMP.length - 1), i = Math.min(Math.floor(x), RAMP.length - 2), f = x - i;
    return RAMP[i].map((c, k) => Math.round(c + (RAMP[i + 1][k] - c) * f));
  }
  function fmtBytes(b) {
    if (b == null) return "-";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(1)) + " " + u[i];
  }
  function fmtNum(n, d) { return n == null ? "-" : Number(n).toLocaleString("en-US", { maximumFractionDigits: d || 0 }); }
  function fmtDur(s) {
    if (s == null) return "-";
    if (s < 60) return s.toFixed(0) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }
  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }
  function fillTable(id, rows, empty) {
    const tb = $(id).tBodies[0];
    if (rows.length === 0 && empty) {
      const tr = document.createElement("tr"), td = cell(empty);
      tr.className = "empty";
      td.colSpan = $(id).tHead.rows[0].cells.length;
      tr.append(td);
      tb.replaceChildren(tr);
      return;
    }
    tb.replaceChildren(...rows.map((cols) => {
      const tr = document.createElement("tr");
      tr.append(...cols);
      return tr;
    }));
  }

  // --- the map ---------------------------------------------------------------

  function slotValue(s) {
    if (!state.load || state.mode === "owner") return null;
    return state.mode === "bytes" ? state.load.bytes[s] : state.load.ops[s];
  }

  function draw() {
    const m = state.map;
    if (!m) return;
    const d = img.data, w = COLS * CELL;
    let max = 0;
    if (state.mode !== "owner" && state.load) {
      for (let s = 0; s < SLOTS; s++) { const v = slotValue(s); if (v != null && v > max) max = v; }
    }
    const moving = new Set(m.migrations.map((x) => x.slot));
    for (let s = 0; s < SLOTS; s++) {
      let rgb;
      if (state.mode === "owner") {
        rgb = nodeColor(m.owners[s]);
      } else {
        const v = slotValue(s);
        rgb = v == null ? GREY : ramp(max > 0 ? Math.log1p(v) / Math.log1p(max) : 0);
      }
      if (state.layer && state.replicas) {
        const st = state.replicas.states[s];
        rgb = st ? LAYER[st] : rgb.map((c) => Math.round(c * DIM));
      }
      const x0 = (s % COLS) * CELL, y0 = Math.floor(s / COLS) * CELL, edge = moving.has(s);
      for (let dy = 0; dy < CELL; dy++) {
        for (let dx = 0; dx < CELL; dx++) {
          const o = ((y0 + dy) * w + x0 + dx) * 4;
          // A move in flight: a white frame around the cell's centre.
          const frame = edge && (dx === 0 || dy === 0 || dx === CELL - 1 || dy === CELL - 1);
          d[o] = frame ? 255 : rgb[0]; d[o + 1] = frame ? 255 : rgb[1]; d[o + 2] = frame ? 255 : rgb[2]; d[o + 3] = 255;
        }
      }
    }
    ctx.putImageData(img, 0, 0);
    document.body.dataset.mapVersion = String(m.version);
    document.body.dataset.mode = state.mode;
    document.body.dataset.layer = state.layer && state.replicas ? "under-replicated" : "";
    $("scale").hidden = state.mode === "owner";
    $("scale-hi").textContent = state.mode === "bytes" ? fmtBytes(max) : fmtNum(max, 1) + " ops/s";
  }

  function drawLegend() {
    const m = state.map;
    const lg = $("legend");
    lg.replaceChildren(...m.nodes.map((id, i) => {
      const span = document.createElement("span");
      span.className = "node";
      span.dataset.node = id;
      span.dataset.color = PALETTE[i % PALETTE.length];
      const zone = (m.zones && m.zones[i]) || "";
      span.dataset.zone = zone;
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.backgroundColor = PALETTE[i % PALETTE.length];
      span.append(sw, document.createTextNode(id + (zone ? " (" + zone + ")" : "")));
      return span;
    }));
  }

  function showTip(ev) {
    const r = canvas.getBoundingClientRect();
    const col = Math.floor((ev.clientX - r.left) / (r.width / COLS)), row = Math.floor((ev.clientY - r.top) / (r.height / COLS));
    if (col < 0 || row < 0 || col >= COLS || row >= COLS || !state.map) { hideTip(); return; }
    state.hover = row * COLS + col;
    renderTip(ev.clientX - r.left, ev.clientY - r.top);
  }
  function renderTip(x, y) {
    const s = state.hover, m = state.map, tip = $("tip");
    if (s < 0 || !m) return;
    const owner = m.owners[s] >= 0 ? m.nodes[m.owners[s]] : "none";
    const L = state.load, has = L && L.bytes[s] != null;
    const lines = ["slot   " + s, "owner  " + owner,
      "keys   " + (has ? fmtNum(L.keys[s]) : "unmeasured"),
      "bytes  " + (has ? fmtBytes(L.bytes[s]) : "unmeasured"),
      "rate   " + (has ? fmtNum(L.ops[s], 1) + " ops/s" : "unmeasured")];
    const R = state.replicas;
    if (R && R.isr[s] && R.isr[s].length) {
      const named = (l) => l.map((i) => R.nodes[i] + (R.zones[i] ? " (" + R.zones[i] + ")" : "")).join(", ");
      lines.push("isr    " + named(R.isr[s]));
      if (R.learners[s]) lines.push("learn  " + named(R.learners[s]));
      if (R.states[s]) lines.push("state  " + R.states[s]);
    }
    const mg = m.migrations.find((x) => x.slot === s);
    if (mg) lines.push("moving " + mg.from + " -> " + mg.to + " (" + mg.phase + ")");
    tip.textContent = lines.join("\n");
    tip.dataset.slot = String(s);
    tip.hidden = false;
    if (x !== undefined) {
      tip.style.left = Math.min(x + 14, 512 - 240) + "px";
      tip.style.top = Math.min(y + 14, 512 - 150) + "px";
    }
  }
  function hideTip() { state.hover = -1; $("tip").hidden = true; }
  $("layer-under").addEventListener("change", (ev) => {
    state.layer = ev.target.checked;
    $("layer-legend").hidden = !state.layer;
    draw();
  });
  canvas.addEventListener("mousemove", showTip);
  canvas.addEventListener("mouseleave", hideTip);

  // The mode is in the URL (#owner, #bytes, #ops), so a view can be linked;
  // a heat mode asked for before any load is measured waits for it.
  const MODES = ["owner", "bytes", "ops"];
  let wanted = MODES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "owner";
  function setMode(m) {
    state.mode = m;
    for (const r of document.querySelectorAll("input[name=mode]")) r.checked = r.value === m;
    draw();
  }
  for (const r of document.querySelectorAll("input[name=mode]")) {
    r.addEventListener("change", () => {
      wanted = r.value;
      history.replaceState(null, "", "#" + r.value);
      setMode(r.value);
    });
  }

  // --- the tables ------------------------------------------------------------

  function renderStatus() {
    const st = state.status;
    $("cluster").textContent = st.cluster_id || "-";
    $("version").textContent = String(st.version);
    $("leader").textContent = st.mover_leader || "none";
    $("server").textContent = st.server || "-";
    const rp = st.replication;
    $("rf").textContent = rp ? rp.rf + " (min isr " + rp.min_isr + ")" : "-";
    $("under").textContent = rp ? String(rp.under_replicated) : "-";
    $("under").className = rp && rp.under_replicated > 0 ? "warn" : "";
    $("spread").textContent = rp && rp.zone_spread.length ? rp.zone_spread.slice().reverse().map((z) => fmtNum(z.slots) + " in " + z.zones).join(", ") : "-";
    $("violations").textContent = rp ? String(rp.zone_violations) : "-";
    $("violations").className = rp && rp.zone_violations > 0 ? "bad" : "";
    const now = Date.now(); // the browser's clock: heartbeat ages are rough
    fillTable("nodes", st.nodes.map((n) => [
      cell(n.id), cell(n.address), cell(n.zone || "-"), cell(n.state, "state-" + n.state), cell(fmtNum(n.slots), "num"),
      cell(n.replicas ? fmtNum(n.replicas.followers) : "-", "num"), cell(n.replicas ? fmtNum(n.replicas.learners) : "-", "num"),
      cell(n.target_slots ? n.slot_ratio.toFixed(3) : "-", "num"),
      cell(fmtNum(n.keys), "num"), cell(fmtBytes(n.bytes), "num"), cell(n.bytes_ratio == null ? "-" : n.bytes_ratio.toFixed(3), "num"),
      cell(fmtNum(n.ops, 1), "num"), cell(n.ops_ratio == null ? "-" : n.ops_ratio.toFixed(3), "num"),
      cell(n.last_heartbeat ? ((now - Date.parse(n.last_heartbeat)) / 1000).toFixed(1) + " s ago" : "none"),
    ]));

    const plan = $("plan"), p = st.plan;
    if (!p) {
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = "no plan applying";
      plan.replaceChildren(note);
    } else {
      const finished = p.done + p.skipped + p.aborted;
      const bar = document.createElement("progress");
      bar.max = p.moves || 1;
      bar.value = finished;
      const line = document.createElement("div");
      line.className = "plan-line";
      const item = (label, value, key) => {
        const s = document.createElement("span");
        const b = document.createElement("b");
        b.textContent = value;
        if (key) b.dataset.key = key;
        s.append(label + " ", b);
        return s;
      };
      line.append(item("plan", p.id, "id"), item("state", p.state, "state"),
        item("moves", finished + " / " + p.moves, "moves"), item("copied", fmtBytes(p.bytes_done) + " / " + fmtBytes(p.bytes), "bytes"),
        item("rate", p.moves_per_second == null ? "-" : fmtNum(p.moves_per_second, 1) + " moves/s, " + fmtBytes(p.bytes_per_second) + "/s", "rate"),
        item("ETA", fmtDur(p.eta_seconds), "eta"));
      const reason = document.createElement("p");
      reason.className = "note";
      reason.textContent = p.reason || "";
      plan.replaceChildren(line, bar, reason);
    }
    $("inflight").hidden = st.in_flight.length === 0;
    fillTable("inflight", st.in_flight.map((m) => [cell(String(m.slot), "num"), cell(m.from), cell(m.to), cell(m.phase),
      cell(fmtBytes(m.bytes_copied) + " / " + fmtBytes(m.bytes), "num")]));

    fillTable("hotslots", st.load.hot_slots.map((h) => [cell(String(h.slot), "num"), cell(h.owner), cell(fmtNum(h.keys), "num"),
      cell(fmtBytes(h.bytes), "num"), cell(fmtNum(h.ops, 1), "num")]),
      st.load.measured.length ? "no data or traffic" : "no store reports load yet");
    fillTable("hotkeys", st.load.hot_keys.map((k) => [cell(k.key), cell(String(k.slot), "num"), cell(k.node), cell(fmtNum(k.rate, 1), "num")]),
      st.load.measured.length ? "no hot keys" : "no store reports load yet");
    fillTable("history", st.history.map((h) => {
      let what = h.kind.replace(/_/g, " ");
      if (h.slot != null) what += " slot " + h.slot;
      if (h.from || h.to) what += " " + (h.from || "-") + " -> " + (h.to || "-");
      if (h.node) what += " " + h.node;
      if (h.plan_id) what += " (" + h.plan_id + ")";
      return [cell(String(h.version), "num"), cell(new Date(h.time).toISOString().replace("T", " ").slice(0, 19)), cell(what), cell(h.by || "-"), cell(h.reason || "", "wrap")];
    }), "no changes yet");

    const measured = st.load.measured.length > 0;
    for (const r of document.querySelectorAll("input[name=mode]")) if (r.value !== "owner") r.disabled = !measured;
    if (wanted !== state.mode && (measured || wanted === "owner")) setMode(wanted);
    if (!measured && state.mode !== "owner") setMode("owner");
    $("mode-note").textContent = measured ? "load from " + st.load.measured.join(", ") : "heat maps once stores report load";
  }

  // --- polling ---------------------------------------------------------------

  async function get(url) {
    const h = {};
    if (state.etags[url]) h["If-None-Match"] = state.etags[url];
    const r = await fetch(url, { headers: h, cache: "no-store", credentials: "same-origin" });
    if (r.status === 304) return null;
    if (!r.ok) {
      let msg = r.status + " " + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    state.etags[url] = r.headers.get("ETag");
    return r.json();
  }

  function setConn(ok, text) {
    const c = $("conn");
    c.className = "conn " + (ok ? "ok" : "bad");
    c.textContent = text;
  }

  function every(ms, fn) {
    let busy = false;
    const tick = async () => {
      if (busy) return;
      busy = true;
      try { await fn(); } catch (e) { setConn(false, String(e.message || e)); } finally { busy = false; }
    };
    tick();
    setInterval(tick, ms);
  }

  // The map every 250 ms: an unchanged map is a 304 from a per-version
  // cache, and a move shows within half a second of slotd serving it.
  every(250, async () => {
    const m = await get("/api/v1/map");
    setConn(true, "live");
    if (!m) return;
    const nodesChanged = !state.map || state.map.nodes.join() !== m.nodes.join();
    state.map = m;
    if (nodesChanged) drawLegend();
    draw();
    if (state.hover >= 0) renderTip();
  });
  every(1000, async () => {
    const st = await get("/api/v1/status");
    if (st) { state.status = st; renderStatus(); }
  });
  every(1000, async () => {
    const r = await get("/api/v1/replicas");
    if (r) { state.replicas = r; if (state.layer) draw(); if (state.hover >= 0) renderTip(); }
  });
  every(2000, async () => {
    const l = await get("/api/v1/load");
    if (l) { state.load = l; if (state.mode !== "owner") draw(); if (state.hover >= 0) renderTip(); }
  });
})();
