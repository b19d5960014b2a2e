"""The sample viewer's page, script and style, as Python strings (the leaderboard ships no data files).

The script builds every element with createElement/textContent: a prompt or an answer is untrusted text and never
reaches innerHTML, so text such as ``</script><img onerror=...>`` shows as text. State lives in the URL's hash
(``#model=..&task=..&length=..&score=wrong&diff=ID&a=M1&b=M2``) so a cell's link opens its samples and a headless
browser can open any view. Cell data is loaded lazily by <script> injection: fetch() of file:// is blocked.
"""

from __future__ import annotations

# 'self' does not match file:// in Chromium; `file:` lets the page load its own scripts (and nothing remote)
CSP = "default-src 'none'; script-src file: 'self'; style-src 'unsafe-inline'; img-src data:"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;max-width:1400px;padding:0 1rem;
color:#1b1f24;line-height:1.45}
h1{font-size:1.4rem}#filters{display:flex;flex-wrap:wrap;gap:.75rem;align-items:end;margin:.5rem 0}
label{font-size:.8rem;display:flex;flex-direction:column}.card{border:1px solid #d0d7de;border-radius:6px;
margin:.75rem 0;padding:.5rem .75rem}.card.wrong{border-left:4px solid #cf222e}.card.right{border-left:4px solid #1a7f37}
.head{font-weight:600}.meta,.metric,.note{color:#57606a;font-size:.85rem}pre{white-space:pre-wrap;word-break:break-word;
margin:.25rem 0;font-size:.8rem;background:#f6f8fa;padding:.4rem}mark.gold{background:#ffe14d;font-weight:600}mark.answer{background:#c8f0d0}
mark.needle{background:#ffd8b0;outline:1px solid #f0a050}mark.del{background:#ffd7d5}.gap{color:#57606a;font-style:italic}
.prompt-note{color:#9a6700}mark.ins{background:#c8f0d0}table{border-collapse:collapse;font-size:.85rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;vertical-align:top;text-align:left}#diff{margin:1rem 0}
details summary{cursor:pointer}
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head><body>
<h1>{title}</h1>
<p class="note"><a href="index.html">back to the board</a>. Click a sample's "diff" to set two models side by side on
the same sample id. A run stores its prompts' hashes, not their text: the board regenerated each prompt from the run's
suite and seed and shows it where its hash matched (else a note says why not). Prompts longer than {fold} characters
show their head, their tail and the text around each highlight, with a button for the rest; in a prompt the needle is
marked <mark class="needle">orange</mark>, the gold in it <mark class="gold">yellow</mark> and the model's answer
<mark class="answer">green</mark> where found.</p>
<div id="filters"></div><div id="status" class="note">loading…</div><div id="diff"></div><div id="list"></div>
<script src="{folder}/index.js"></script><script src="{folder}/viewer.js"></script>
</body></html>
"""

SCRIPT = r"""
"use strict";
var BOARD = window.ctxbenchIndex, LOADED = {}, WAIT = {}, PAGE_SIZE = 100, shown = PAGE_SIZE;
window.ctxbenchCell = window.ctxbenchPrompts = function (file, rows) { LOADED[file] = rows;
  (WAIT[file] || []).forEach(function (f) { f(); }); };
function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls; return e; }
function state() { var s = {}; location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
  if (!kv) return; var i = kv.indexOf("="); s[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); });
  return s; }
function setState(s) { var parts = []; Object.keys(s).forEach(function (k) { if (s[k] !== "" && s[k] !== undefined)
  parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(s[k])); }); location.hash = parts.join("&"); }
function load(file, done) { if (LOADED[file]) return done(); if (WAIT[file]) { WAIT[file].push(done); return; }
  WAIT[file] = [done]; var s = document.createElement("script"); s.src = BOARD.folder + "/" + file;
  s.onerror = function () { LOADED[file] = []; WAIT[file].forEach(function (f) { f(); }); }; document.head.appendChild(s); }
function loadAll(files, done) { var left = files.length; if (!left) return done(); files.forEach(function (f) {
  load(f, function () { if (--left === 0) done(); }); }); }
function select(name, label, values, current, words) { var l = el("label", label), s = el("select"); s.name = name;
  [""].concat(values).forEach(function (v) { var o = el("option", v === "" ? "all" : (words ? words[v] : v)); o.value = v;
    if (String(v) === String(current || "")) o.selected = true; s.appendChild(o); });
  s.onchange = function () { var st = state(); st[name] = s.value; shown = PAGE_SIZE; setState(st); }; l.appendChild(s); return l; }
function filters(s) { var f = document.getElementById("filters"); f.textContent = "";
  f.appendChild(select("model", "model", BOARD.models, s.model)); f.appendChild(select("task", "task", BOARD.tasks, s.task));
  f.appendChild(select("length", "length", BOARD.lengths, s.length)); f.appendChild(select("depth", "depth", BOARD.depths, s.depth));
  f.appendChild(select("score", "score", ["wrong", "partial", "right"], s.score,
    {wrong: "wrong (score 0)", partial: "not fully right (< 1)", right: "right (score 1)"})); }
function cellsFor(s) { return BOARD.cells.filter(function (c) { return (!s.model || c.model === s.model) &&
  (!s.task || c.task === s.task) && (!s.length || String(c.length) === s.length); }); }
function keep(s, r) { if (s.depth && String(r.depth) !== s.depth) return false;
  if (s.score === "wrong") return r.score === 0; if (s.score === "partial") return r.score < 1;
  if (s.score === "right") return r.score === 1; return true; }
function hits(text, marks, words) { var spans = [];
  marks.forEach(function (m) { var needle = String(m.text || "").trim(); if (!needle || (words && needle.length < BOARD.shortest)) return;
    var edge = words ? ["(?<![\\p{L}\\p{N}_])", "(?![\\p{L}\\p{N}_])"] : ["", ""], hit;
    var re = new RegExp(edge[0] + needle.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + edge[1], "giu");
    while (spans.length < 200 && (hit = re.exec(text))) spans.push([hit.index, hit.index + hit[0].length, m.cls]); });
  return spans.sort(function (a, b) { return a[0] - b[0]; }); }
function markInto(out, text, spans) { var pos = 0;
  spans.forEach(function (sp) { if (sp[0] < pos) return; out.appendChild(document.createTextNode(text.slice(pos, sp[0])));
    var m = el("mark", sp[3] ? null : text.slice(sp[0], sp[1]), sp[2]);
    if (sp[3]) markInto(m, text.slice(sp[0], sp[1]), sp[3]); out.appendChild(m); pos = sp[1]; });
  out.appendChild(document.createTextNode(text.slice(pos))); return out; }
function marked(text, marks) { return markInto(el("pre"), text, hits(text, marks)); }
function sentence(text, a, b) { var lo = a, hi = b; while (lo > 0 && a - lo < 200 && !/[.!?\n]/.test(text[lo - 1])) lo--;
  while (hi < text.length && hi - b < 200 && !/[.!?\n]/.test(text[hi])) hi++; if (hi < text.length && text[hi] !== "\n") hi++;
  while (lo < a && /\s/.test(text[lo])) lo++; return [lo, hi]; }
function inContext(text, r) { var gold = hits(text, golds(r), true), spans = [];
  gold.forEach(function (g) { var s = sentence(text, g[0], g[1]), last = spans[spans.length - 1];
    if (last && s[0] < last[1]) return; spans.push([s[0], s[1], "needle", [[g[0] - s[0], g[1] - s[0], "gold"]]]); });
  hits(text, [{text: r.answer, cls: "answer"}], true).forEach(function (h) { if (!spans.some(function (s) { return h[0] < s[1] && s[0] < h[1]; }))
    spans.push(h); });
  return markInto(el("pre", null, "prompt"), text, spans.sort(function (a, b) { return a[0] - b[0]; })); }
function excerpts(v, r) { var box = el("pre", null, "prompt excerpt"), end = 0;
  v.parts.forEach(function (p) { if (p[0] > end) box.appendChild(el("span", "\n[… " + (p[0] - end) + " characters …]\n", "gap"));
    var piece = inContext(p[1], r); while (piece.firstChild) box.appendChild(piece.firstChild); end = p[0] + p[1].length; });
  if (end < v.chars) box.appendChild(el("span", "\n[… " + (v.chars - end) + " characters …]", "gap")); return box; }
function showPrompt(slot, r, v) { slot.textContent = ""; var hash = " (prompt hash " + (r.prompt_hash || "?") + ")";
  if (!v || v.note) { slot.appendChild(el("div", (v ? v.note : "prompt not on this board (built with --no-prompts, or from scores without their runs)") + hash,
    "note prompt-note")); return; }
  var title = "prompt (" + v.chars + " characters, " + v.source + ", hash " + r.prompt_hash + ")";
  if (v.text !== undefined && !v.parts) { slot.appendChild(fold(title, inContext(v.text, r), true)); return; }
  var box = el("div"), short = excerpts(v, r); box.appendChild(short);
  if (v.text !== undefined) { var whole = null, b = el("button", "show the whole prompt", "expand"); box.insertBefore(b, short);
    b.onclick = function () { if (!whole) whole = inContext(v.text, r); var open = b.textContent === "show the whole prompt";
      box.replaceChild(open ? whole : short, open ? short : whole); b.textContent = open ? "show excerpts only" : "show the whole prompt"; }; }
  else box.appendChild(el("div", "the board keeps excerpts of prompts over " + BOARD.keep + " characters: regenerate the whole " +
    "text with `ctxbench generate` at the run's suite, length and seed", "note"));
  slot.appendChild(fold(title, box, true)); }
function golds(r) { return (r.gold || []).map(function (g) { return {text: g, cls: "gold"}; }); }
function fold(title, body, open) { var d = el("details"), sm = el("summary", title); d.appendChild(sm); d.appendChild(body);
  d.open = !!open; return d; }
function card(r) { var c = el("div", null, "card " + (r.score === 1 ? "right" : r.score === 0 ? "wrong" : "partial"));
  c.setAttribute("data-id", r.id); c.setAttribute("data-model", r.model);
  c.appendChild(el("div", r.model + " · " + r.id + " · score " + r.score, "head"));
  c.appendChild(el("div", "length " + r.length + " · depth " + (r.depth === null ? "–" : r.depth) + " · prompt tokens " +
    (r.prompt_tokens || "–") + " · generated tokens " + (r.generated_tokens || "–") +
    (r.reasoning_tokens ? " · reasoning tokens " + r.reasoning_tokens : "") + " · run " + r.run_id, "meta"));
  c.appendChild(el("div", (r.metric || "metric ?") + ": " + (BOARD.metrics[r.metric] || "no description"), "metric"));
  c.appendChild(el("div", "gold: " + JSON.stringify(r.gold || []), "meta"));
  var answer = marked(r.answer, golds(r)); answer.className = "answer"; c.appendChild(answer);
  if (r.reasoning) c.appendChild(fold("reasoning (" + r.reasoning.length + " characters)", el("pre", r.reasoning), false));
  c.appendChild(el("div", "prompt loading…", "prompt-slot note"));
  var others = BOARD.models.filter(function (m) { return m !== r.model; });
  if (others.length) { var b = el("button", "diff with " + others[0]); b.className = "diff";
    b.onclick = function () { var st = state(); st.diff = r.id; st.a = r.model; st.b = others[0]; setState(st); }; c.appendChild(b); }
  return c; }
function render() { var s = state(); filters(s); var cells = cellsFor(s), status = document.getElementById("status");
  var total = cells.reduce(function (n, c) { return n + c.n; }, 0); diff(s);
  if (total > BOARD.limit) { document.getElementById("list").textContent = ""; status.setAttribute("data-count", "");
    status.textContent = total + " samples in " + cells.length + " cells: pick a model, task or length to load at most " +
      BOARD.limit + " at once (each cell is one file, loaded when a filter needs it)"; return; }
  status.textContent = "loading " + cells.length + " cells…";
  loadAll(cells.map(function (c) { return c.file; }), function () { var rows = [];
    cells.forEach(function (c) { (LOADED[c.file] || []).forEach(function (r, i) { if (keep(s, r)) rows.push([r, c.prompts, i]); }); });
    var list = document.getElementById("list"); list.textContent = "";
    status.textContent = rows.length + " samples" + (rows.length > shown ? ", showing " + shown : "") + " (" + cells.length + " cells loaded)";
    status.setAttribute("data-count", rows.length);
    rows.slice(0, shown).forEach(function (x) { var c = card(x[0]), slot = c.querySelector(".prompt-slot"); list.appendChild(c);
      if (!x[1]) return showPrompt(slot, x[0], null);
      load(x[1], function () { showPrompt(slot, x[0], (LOADED[x[1]] || [])[x[2]]); }); });
    if (rows.length > shown) { var more = el("button", "show " + PAGE_SIZE + " more");
      more.onclick = function () { shown += PAGE_SIZE; render(); }; list.appendChild(more); } }); }
function words(a, b) { var x = a.split(/(\s+)/), y = b.split(/(\s+)/), n = x.length, m = y.length;
  if (n * m > 4e6) return [[a, ""], [b, ""]];
  var t = []; for (var i = 0; i <= n; i++) { t.push(new Array(m + 1).fill(0)); }
  for (i = n - 1; i >= 0; i--) for (var j = m - 1; j >= 0; j--) t[i][j] = x[i] === y[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
  var A = [], B = []; i = 0; j = 0;
  while (i < n || j < m) { if (i < n && j < m && x[i] === y[j]) { A.push([x[i], ""]); B.push([y[j], ""]); i++; j++; }
    else if (j >= m || (i < n && t[i + 1][j] >= t[i][j + 1])) { A.push([x[i++], "del"]); } else { B.push([y[j++], "ins"]); } }
  return [A, B]; }
function diffPre(parts) { var p = el("pre"); if (typeof parts[0] === "string") { p.textContent = parts[0]; return p; }
  parts.forEach(function (w) { p.appendChild(w[1] ? el("mark", w[0], w[1]) : document.createTextNode(w[0])); }); return p; }
function diff(s) { var box = document.getElementById("diff"); box.textContent = ""; if (!s.diff || !s.a || !s.b) return;
  var id = s.diff, parts = /^(.*)@(\d+)#/.exec(id), task = parts ? parts[1] : "", length = parts ? parts[2] : "";
  var files = BOARD.cells.filter(function (c) { return (c.model === s.a || c.model === s.b) && c.task === task &&
    String(c.length) === length; }).map(function (c) { return c.file; });
  loadAll(files, function () { var found = {}; files.forEach(function (f) { (LOADED[f] || []).forEach(function (r) {
      if (r.id === id) found[r.model] = r; }); });
    box.textContent = ""; box.appendChild(el("h2", "diff on " + id)); var pick = el("label", "compare with");
    var sel = el("select"); sel.name = "b"; BOARD.models.filter(function (m) { return m !== s.a; }).forEach(function (m) {
      var o = el("option", m); o.value = m; o.selected = m === s.b; sel.appendChild(o); });
    sel.onchange = function () { var st = state(); st.b = sel.value; setState(st); }; pick.appendChild(sel); box.appendChild(pick);
    var a = found[s.a], b = found[s.b], t = el("table"), head = el("tr"); head.appendChild(el("th", ""));
    head.appendChild(el("th", s.a)); head.appendChild(el("th", s.b)); t.appendChild(head);
    if (!a || !b) { box.appendChild(el("p", "sample " + id + " was not scored for " + (!a ? s.a : s.b), "note")); return; }
    var d = words(a.answer, b.answer);
    [["score", a.score, b.score], ["answer", d[0], d[1]], ["generated tokens", a.generated_tokens, b.generated_tokens],
     ["reasoning tokens", a.reasoning_tokens, b.reasoning_tokens]].forEach(function (row) { var tr = el("tr");
      tr.appendChild(el("th", row[0])); [row[1], row[2]].forEach(function (v) { var td = el("td");
        if (Array.isArray(v)) td.appendChild(diffPre(v)); else td.textContent = v === undefined || v === null ? "–" : v;
        tr.appendChild(td); }); t.appendChild(tr); });
    t.className = a.score === b.score ? "same" : "differs"; box.appendChild(t); }); }
window.addEventListener("hashchange", render);
render();
"""
