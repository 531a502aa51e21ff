// textdp serve: the page's logic. Vanilla JS, no build step, talks only to this origin.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  // The page token arrives in the URL's fragment (#token=...), which the browser never sends to a server;
  // it is kept in this tab's sessionStorage (a reload keeps it) and removed from the address bar.
  const token = (function () {
    const m = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem("textdp-token", m[1]);
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem("textdp-token") || "";
  })();
  const state = { mechanisms: {}, limits: {}, seq: { release: 0, curve: 0 }, curve: null, timers: {} };

  async function api(path, body) {
    const opts = { method: body === undefined ? "GET" : "POST", headers: { "X-TextDP-Token": token } };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    let res;
    try { res = await fetch(path, opts); } catch (e) { throw new Error("the textdp server is not answering (stopped?)"); }
    let data;
    try { data = await res.json(); } catch (e) { throw new Error("unexpected answer from the server (" + res.status + ")"); }
    if (!res.ok) throw new Error(data.error || ("error " + res.status));
    return data;
  }

  const busy = { n: 0 };
  function working(delta) { busy.n += delta; $("busy").hidden = busy.n <= 0; }
  function showError(msg) { const el = $("error"); el.textContent = msg ? "error: " + msg : ""; el.hidden = !msg; }
  function later(name, fn, ms) { clearTimeout(state.timers[name]); state.timers[name] = setTimeout(fn, ms); }

  function fmt(x) {
    if (x === null || x === undefined) return "–";
    return String(Number(x.toPrecision(3)));  // 10, 0.1, 31.6, 1e-7
  }
  // "2.4 × 10^9" with the exponent set as a superscript
  function withPowers(textValue) {
    const nodes = [];
    const parts = textValue.split(/10\^(\d+)/);
    parts.forEach((part, i) => {
      if (i % 2 === 0) { if (part) nodes.push(document.createTextNode(part)); }
      else { nodes.push(document.createTextNode("10"), Object.assign(document.createElement("sup"), { textContent: part })); }
    });
    return nodes;
  }
  // what the person typed: a number when it reads as one (1e-5 included), else the text itself, so that the
  // server's refusal can quote it ("abc", "2.5" for N) instead of a silently changed value
  function typed(id) {
    const raw = $(id).value.trim();
    const x = raw === "" ? NaN : Number(raw);
    return isFinite(x) ? x : raw;
  }
  function epsilon() { return typed("epsilon"); }
  function mechanism() { return $("mechanism").value; }
  function isBag() { return (state.mechanisms[mechanism()] || {}).kind === "bag"; }
  function size() { return isBag() ? typed("size") : undefined; }
  // a language-model rewriter's public parameters: the clipping bounds (and δ when it takes one), as typed
  function lmParams() {
    const m = state.mechanisms[mechanism()] || {};
    if (!m.lm) return {};
    const p = { clip: [typed("clip-low"), typed("clip-high")] };
    if (m.delta !== null && m.delta !== undefined) p.delta = typed("delta");
    if (m.prior !== undefined) {
      p.prior = $("prior").checked;
      if (p.prior) p.public_top_k = typed("public-top-k");
    }
    return p;
  }
  function text() { return $("text").value; }

  function setEpsilon(x, fromSlider) {
    if (!fromSlider) {
      const lg = Math.log10(x);
      if (isFinite(lg)) $("epsilon-slider").value = String(Math.min(3, Math.max(-1, lg)));
    }
    $("epsilon").value = String(Number(x.toPrecision(3)));
    drawPlot();
  }

  function span(word, cls) {
    const s = document.createElement("span");
    s.textContent = word;
    if (cls) s.className = "w " + cls;
    return s;
  }

  function renderRelease(r) {
    const inp = $("input-view");
    inp.replaceChildren(...r.input.map(([t, c]) => (c ? span(t, c) : document.createTextNode(t))));
    const out = $("output");
    const items = [];
    r.output.forEach((o, i) => {
      if (i) items.push(document.createTextNode(" "));
      items.push(span(o.word, o.kept ? "kept" : "replaced"));
    });
    out.replaceChildren(...items);
    $("kind").textContent = { bag: "bag of N words, sorted", text: "each protected word replaced in place",
      sentence: "each sentence rewritten by the model" }[r.kind];
    $("kept-fraction").textContent = (100 * r.kept_fraction).toFixed(0) + "%";
    $("kept-count").textContent = (r.kind === "sentence" ? "of your words appear in the rewritten text: "
      : "of the protected words survived unchanged: ") + r.kept + " of " + r.protected +
      " (ε = " + fmt(r.epsilon) + ", " + r.mechanism + ").";
    $("meaning").replaceChildren(...r.meaning.map((m) => {
      const li = document.createElement("li");
      const f = Object.assign(document.createElement("strong"), { className: "factor" });
      f.append(...withPowers("×\u202f" + m.factor));
      li.append(f, ...withPowers(" " + m.sentence));
      return li;
    }));
    $("guarantee").textContent = r.guarantee.statement;
    $("not-covered").textContent = r.guarantee.not_covered || "(the statement above lists everything it covers)";
    $("record").textContent = JSON.stringify(r.record, null, 2);
    $("notes").replaceChildren(...r.notes.map((n) => { const p = document.createElement("p"); p.textContent = "note: " + n; return p; }));
  }

  async function release() {
    if (!text().trim()) { clearOutputs(); return; }
    const seq = ++state.seq.release;
    working(1);
    try {
      const r = await api("/api/privatize", Object.assign({ text: text(), mechanism: mechanism(), epsilon: epsilon(),
        size: size() }, lmParams()));
      if (seq === state.seq.release) {
        showError(""); renderRelease(r);
        if (state.curveCleared) later("curve", curve, 0);  // an earlier error cleared the curve of this text
      }
    } catch (e) {
      // a privacy page never leaves an older release on screen as if it belonged to the new input
      if (seq === state.seq.release) { clearOutputs(); showError(e.message); }
    } finally { working(-1); }
  }

  async function curve() {
    state.curveCleared = false;
    if (!text().trim()) { state.curve = null; drawPlot(); return; }
    const seq = ++state.seq.curve;
    $("curve-method").textContent = "computing the curve…";
    working(1);
    try {
      const c = await api("/api/curve", { text: text(), mechanism: mechanism(), target: typed("target"), size: size() });
      if (seq !== state.seq.curve) return;
      state.curve = c; state.curveCleared = false;
      $("curve-method").textContent = "How: " + c.method + ".";
      $("target-eps").textContent = c.epsilon_for_target === null ? c.why : "ε ≈ " + fmt(c.epsilon_for_target) +
        " keeps " + Math.round(100 * c.target) + "% of this text's words";
      $("use-target").disabled = c.epsilon_for_target === null;
      drawPlot();
    } catch (e) {
      if (seq === state.seq.curve) {
        state.curve = null; $("curve-method").textContent = ""; $("target-eps").textContent = "–";
        $("use-target").disabled = true; showError(e.message); drawPlot();
      }
    } finally { working(-1); }
  }

  // everything that describes a release or the text it came from
  function clearOutputs() {
    $("output").replaceChildren(); $("input-view").replaceChildren(); $("notes").replaceChildren();
    $("kind").textContent = "";
    $("kept-fraction").textContent = "–";
    $("kept-count").textContent = "of the protected words survived unchanged.";
    $("meaning").replaceChildren(Object.assign(document.createElement("li"), { textContent: "–" }));
    $("guarantee").textContent = "–"; $("not-covered").textContent = "–";
    $("record").textContent = ""; state.curve = null; state.curveCleared = true; $("target-eps").textContent = "–";
    $("curve-method").textContent = ""; $("use-target").disabled = true; drawPlot();
  }

  // --- the plot: inline SVG, x = log10 ε in [-1, 3], y = kept fraction ---------------------------------
  const NS = "http://www.w3.org/2000/svg";
  function el(name, attrs, txt) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (txt !== undefined) e.textContent = txt;
    return e;
  }
  function drawPlot() {
    const W = 460, H = 240, L = 46, R = 14, T = 14, B = 40;
    const x = (e) => L + (Math.log10(e) + 1) / 4 * (W - L - R);
    const y = (f) => T + (1 - f) * (H - T - B);
    const svg = el("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", role: "img", "aria-label": "kept fraction against epsilon" });
    for (const f of [0, 0.25, 0.5, 0.75, 1]) {
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(f), y2: y(f), class: "grid" }));
      svg.appendChild(el("text", { x: L - 6, y: y(f) + 4, "text-anchor": "end", class: "axis" }, Math.round(100 * f) + "%"));
    }
    for (const e of [0.1, 1, 10, 100, 1000]) {
      svg.appendChild(el("line", { x1: x(e), x2: x(e), y1: T, y2: H - B, class: "grid" }));
      svg.appendChild(el("text", { x: x(e), y: H - B + 16, "text-anchor": "middle", class: "axis" }, String(e)));
    }
    svg.appendChild(el("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "label" }, "ε (log scale)"));
    const c = state.curve;
    if (c && c.points.length) {
      const pts = c.points.map(([e, f]) => x(e).toFixed(1) + "," + y(f).toFixed(1)).join(" ");
      svg.appendChild(el("polyline", { points: pts, class: "curve" }));
      if (c.points.length < 20) for (const [e, f] of c.points) svg.appendChild(el("circle", { cx: x(e), cy: y(f), r: 3, class: "pt" }));
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(c.target), y2: y(c.target), class: "target" }));
      if (c.epsilon_for_target !== null) {
        svg.appendChild(el("circle", { cx: x(c.epsilon_for_target), cy: y(c.target), r: 5, class: "cal" }));
      }
    } else {
      svg.appendChild(el("text", { x: (L + W - R) / 2, y: H / 2, "text-anchor": "middle", class: "label" }, "type a text to see its curve"));
    }
    const e = epsilon();
    if (typeof e === "number" && e > 0 && isFinite(e)) {
      const xe = Math.min(W - R, Math.max(L, x(e)));
      svg.appendChild(el("line", { x1: xe, x2: xe, y1: T, y2: H - B, class: "now" }));
      const right = xe > W - R - 70;
      svg.appendChild(el("text", { x: right ? xe - 4 : xe + 4, y: T + 10, "text-anchor": right ? "end" : "start",
        class: "now-label" }, "ε = " + fmt(e)));
    }
    $("plot").replaceChildren(svg);
  }

  async function runAudit() {
    const out = $("audit-result");
    const eps = epsilon();
    out.textContent = "auditing " + mechanism() + " at ε = " + (typeof eps === "number" ? fmt(eps) : eps) + "…";
    $("audit-button").disabled = true;
    working(1);
    try {
      const a = await api("/api/audit", { mechanism: mechanism(), epsilon: eps });
      showError("");
      const rows = [
        ["claimed ε for the pair", a.claimed_epsilon.toFixed(3) + (a.claimed_delta ? " (δ " + a.claimed_delta + ")" : "")],
        ["lower bound (" + Math.round(100 * a.confidence) + "% Clopper–Pearson)", a.lower_bound.toFixed(3)],
        ["plug-in estimate", a.estimated_epsilon === null ? "∞" : a.estimated_epsilon.toFixed(3)],
        ["pair", a.pair], ["samples per input", a.samples.toLocaleString("en")], ["time", a.seconds + " s"],
      ];
      const table = document.createElement("table");
      for (const [k, v] of rows) {
        const tr = document.createElement("tr");
        tr.append(Object.assign(document.createElement("th"), { textContent: k }), Object.assign(document.createElement("td"), { textContent: v }));
        table.appendChild(tr);
      }
      const verdict = document.createElement("div");
      verdict.className = "verdict " + (a.passed ? "pass" : "fail");
      verdict.textContent = a.passed ? "PASSED: lower bound " + a.lower_bound.toFixed(3) + " ≤ claim " + a.claimed_epsilon.toFixed(3)
        : "VIOLATION: lower bound " + a.lower_bound.toFixed(3) + " > claim " + a.claimed_epsilon.toFixed(3);
      // the bound as a share of the claim, labelled: 100% would be a violation
      const share = Math.min(100, 100 * a.lower_bound / Math.max(a.claimed_epsilon, 1e-9));
      const label = Object.assign(document.createElement("div"), { className: "bar-label",
        textContent: "The lower bound is " + share.toFixed(0) + "% of the claim (100% or more would be a violation):" });
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.setAttribute("role", "meter");
      bar.setAttribute("aria-label", "lower bound as a share of the claim");
      bar.setAttribute("aria-valuenow", share.toFixed(0));
      bar.setAttribute("aria-valuemin", "0");
      bar.setAttribute("aria-valuemax", "100");
      const fill = document.createElement("div");
      fill.className = "fill";
      fill.style.width = share.toFixed(1) + "%";
      bar.appendChild(fill);
      out.replaceChildren(verdict, label, bar, table);
    } catch (e) {
      out.textContent = "";
      showError(e.message);
    } finally { $("audit-button").disabled = false; working(-1); }
  }

  function onMechanism() {
    const m = state.mechanisms[mechanism()];
    $("size-field").hidden = m.kind !== "bag";
    $("clip-field").hidden = !m.lm;
    $("delta-field").hidden = !(m.lm && m.delta !== null);
    $("prior-field").hidden = !(m.lm && m.prior !== undefined);
    if (m.lm && m.prior !== undefined) {
      $("prior").checked = m.prior; $("public-top-k").value = String(m.public_top_k);
    }
    if (m.lm) {
      $("clip-low").value = String(m.clip[0]); $("clip-high").value = String(m.clip[1]);
      if (m.delta !== null) $("delta").value = String(m.delta);
    }
    setEpsilon(m.epsilon, false);
    $("audit-result").replaceChildren();
    release(); curve();
  }

  async function init() {
    if (!token) {
      showError("this page needs its page token: open the full address that textdp serve printed (the part after # " +
                "included), or start textdp serve again");
      return;
    }
    try {
      const d = await api("/api/mechanisms");
      state.limits = d.limits;
      for (const m of d.mechanisms) {
        state.mechanisms[m.name] = m;
        $("mechanism").appendChild(Object.assign(document.createElement("option"), { value: m.name, textContent: m.name }));
      }
      onMechanism();
    } catch (e) { showError(e.message); }
  }

  $("mechanism").addEventListener("change", onMechanism);
  $("epsilon-slider").addEventListener("input", () => {
    setEpsilon(Math.pow(10, parseFloat($("epsilon-slider").value)), true);
    later("release", release, 120);
  });
  $("epsilon").addEventListener("change", () => {
    const e = epsilon();
    if (typeof e === "number" && e > 0) {
      const lg = Math.log10(e);
      $("epsilon-slider").value = String(Math.min(3, Math.max(-1, lg)));
    }
    drawPlot(); release();
  });
  $("size").addEventListener("change", () => { release(); curve(); });
  for (const id of ["clip-low", "clip-high", "delta", "prior", "public-top-k"]) $(id).addEventListener("change", release);
  $("text").addEventListener("input", () => { later("release", release, 300); later("curve", curve, 700); });
  $("target").addEventListener("change", () => later("curve", curve, 200));
  $("use-target").addEventListener("click", () => {
    if (state.curve && state.curve.epsilon_for_target !== null) { setEpsilon(state.curve.epsilon_for_target, false); release(); }
  });
  $("audit-button").addEventListener("click", runAudit);
  const box = $("text");
  box.addEventListener("dragover", (ev) => { ev.preventDefault(); box.classList.add("drop"); });
  box.addEventListener("dragleave", () => box.classList.remove("drop"));
  box.addEventListener("drop", (ev) => {
    ev.preventDefault(); box.classList.remove("drop");
    const f = ev.dataTransfer.files && ev.dataTransfer.files[0];
    if (!f) return;
    if (f.size > 4 * state.limits.max_text_chars) { showError("the file is too large for this page; use textdp obfuscate"); return; }
    f.text().then((t) => { box.value = t; release(); curve(); }, () => showError("cannot read that file as text"));
  });
  drawPlot();
  init();
})();
