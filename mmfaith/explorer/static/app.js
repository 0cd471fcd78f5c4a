/* mmfaith explorer: a static page over window.MMFAITH_EXPLORER (written by mmfaith/explorer/page.py).
   No library, no network: everything it loads is beside index.html. The filter state lives in the URL's
   hash (#verdict=wrong&probe=same&metric=DS&f.tier=easy), so every metric link is a plain link. */
(function () {
  "use strict";
  var T0 = performance.now();
  var D = window.MMFAITH_EXPLORER || {packed: [], metrics: [], models: []};
  D.items = unpack(D);
  var T1 = performance.now();

  /* The inverse of mmfaith/explorer/packing.py's pack. */
  function unpack(T) {
    var S = T.strings || [];
    function s(i) { return i === null ? null : S[i]; }
    function box(r) { var n = r.length; return {b: r.slice(n - 6, n - 2), label: s(r[n - 2]), kind: s(r[n - 1])}; }
    function model(r) {
      var parts = {};
      T.part_keys.forEach(function (k, i) { parts[k] = r[2][i]; });
      return {verdict: s(r[0]), flags: r[1].map(s), parts: parts,
        probes: r[3].map(function (p) { return {name: s(p[0]), answer: s(p[1]), status: s(p[2]), correct: p[3], text: p[4]}; }),
        boxes: r[4].map(function (b) { var o = box(b); o.image = b[0]; return o; }), turns: r[5]};
    }
    return (T.packed || []).map(function (r) {
      var facets = {}, models = {};
      (T.facet_keys || []).forEach(function (k, i) { if (r[5][i] !== null) facets[k] = s(r[5][i]); });
      T.models.forEach(function (m, i) { if (r[6][i]) models[m] = model(r[6][i]); });
      return {id: r[0], title: s(r[1]), options: r[2].map(s), gold: s(r[3]),
        images: r[4].map(function (x) { var im = T.images[x[0]]; return {sha256: im[0], width: im[1], height: im[2], label: s(x[1]), boxes: x[2].map(box)}; }),
        facets: facets, models: models};
    });
  }
  var PAGE = 50;
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c != null) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function svgEl(tag, attrs) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }
  function fmt(v) {
    if (v === null || v === undefined) return "n/a";
    if (typeof v === "number" && Math.abs(v) <= 1 && v !== 0) return v.toFixed(3);
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
    return String(v);
  }

  /* ---------- state <-> hash ---------- */
  function readState() {
    var s = {q: "", verdict: "", probe: "", model: "", flag: "", metric: "", disagree: "", sort: "", page: 0, f: {}};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      if (!part) return;
      var i = part.indexOf("="), k = decodeURIComponent(part.slice(0, i)), v = decodeURIComponent(part.slice(i + 1));
      if (k.indexOf("f.") === 0) s.f[k.slice(2)] = v;
      else if (k === "page") s.page = parseInt(v, 10) || 0;
      else if (k in s) s[k] = v;
    });
    return s;
  }
  function hashOf(s) {
    var parts = [];
    ["q", "verdict", "probe", "model", "flag", "metric", "disagree", "sort"].forEach(function (k) {
      if (s[k]) parts.push(k + "=" + encodeURIComponent(s[k]));
    });
    Object.keys(s.f).sort().forEach(function (k) { if (s.f[k]) parts.push("f." + encodeURIComponent(k) + "=" + encodeURIComponent(s.f[k])); });
    if (s.page) parts.push("page=" + s.page);
    return "#" + parts.join("&");
  }
  function go(s) { location.hash = hashOf(s); }

  /* ---------- indexes built once ---------- */
  var facetValues = {}, probeNames = [], flagNames = [], seenProbe = {}, seenFlag = {};
  D.items.forEach(function (item, n) {
    item._n = n;
    item._id = item.id.toLowerCase();
    Object.keys(item.facets || {}).forEach(function (k) {
      (facetValues[k] = facetValues[k] || {})[item.facets[k]] = true;
    });
    D.models.forEach(function (m) {
      var mv = item.models[m];
      if (!mv) return;
      mv.probes.forEach(function (p) { if (!seenProbe[p.name]) { seenProbe[p.name] = 1; probeNames.push(p.name); } });
      mv.flags.forEach(function (f) { if (!seenFlag[f]) { seenFlag[f] = 1; flagNames.push(f); } });
    });
  });
  flagNames.sort();

  function probeClass(p) {
    if (p.status === "failed") return "failed";
    if (p.status !== "answered") return "unanswered";
    return p.correct === false ? "wrong" : p.correct === true ? "right" : "answered";
  }
  function disagrees(item) {
    var keys = D.models.map(function (m) {
      var mv = item.models[m];
      return mv ? mv.probes.map(function (p) { return p.status + ":" + p.answer; }).join("|") : "absent";
    });
    return keys.some(function (k) { return k !== keys[0]; });
  }
  function matches(item, s) {
    if (s.q && item._id.indexOf(s.q.toLowerCase()) < 0) return false;
    for (var k in s.f) if (s.f[k] && (item.facets || {})[k] !== s.f[k]) return false;
    if (s.disagree && !disagrees(item)) return false;
    var models = s.model ? [s.model] : D.models;
    if (s.verdict || s.flag || s.metric) {
      var any = models.some(function (m) {
        var mv = item.models[m];
        if (!mv) return false;
        if (s.flag && mv.flags.indexOf(s.flag) < 0) return false;
        if (s.metric && (mv.parts[s.metric] === null || mv.parts[s.metric] === undefined)) return false;
        if (s.verdict) {
          if (s.probe) {
            var p = mv.probes.filter(function (x) { return x.name === s.probe; })[0];
            if (!p || probeClass(p) !== s.verdict) return false;
          } else if (mv.verdict !== s.verdict) return false;
        }
        return true;
      });
      if (!any) return false;
    }
    return true;
  }
  var ORDER = {failed: 0, unanswered: 1, wrong: 2, right: 3};
  function sortItems(list, s) {
    if (s.sort === "id") list.sort(function (a, b) { return a.id < b.id ? -1 : a.id > b.id ? 1 : 0; });
    else if (s.sort === "verdict") list.sort(function (a, b) {
      var m = s.model || D.models[0], va = a.models[m], vb = b.models[m];
      return (va ? ORDER[va.verdict] : 9) - (vb ? ORDER[vb.verdict] : 9) || a._n - b._n;
    });
    return list;
  }

  /* ---------- images ---------- */
  function frame(shown, boxes, full) {
    var src = "explorer/" + (full ? "f/" : "t/") + shown.sha256 + ".jpg";
    var img = el("img", {src: src, alt: shown.label, loading: full ? "eager" : "lazy"});
    var w = shown.width || 1, h = shown.height || 1;
    var svg = svgEl("svg", {viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none"});
    var stroke = Math.max(2, Math.round(Math.max(w, h) / 160));
    boxes.forEach(function (b) {
      var r = svgEl("rect", {x: b.b[0], y: b.b[1], width: b.b[2], height: b.b[3], "class": b.kind, "stroke-width": stroke});
      r.appendChild(svgEl("title", {})).textContent = b.label;
      svg.appendChild(r);
      if (b.kind === "crop" || b.kind === "gold") {
        var t = svgEl("text", {x: b.b[0] + stroke, y: b.b[1] + stroke * 7, "class": b.kind, "font-size": stroke * 7});
        t.textContent = b.kind === "crop" ? b.label.replace("crop ", "") : b.label.split(" ")[0];
        if (b.kind === "crop" || /^\d/.test(b.label)) svg.appendChild(t);
      }
    });
    var fig = el("figure", {cls: "frame", "data-sha": shown.sha256}, [el("div", {cls: "pic"}, [img, svg]),
      el("figcaption", {text: shown.label})]);
    fig.style.margin = "0";
    return fig;
  }
  function imageBoxes(item, index) {
    var boxes = (item.images[index].boxes || []).slice();
    D.models.forEach(function (m) {
      var mv = item.models[m];
      if (mv) mv.boxes.forEach(function (b) { if (b.image === index) boxes.push(b); });
    });
    return boxes;
  }
  function openLightbox(item, index) {
    var box = $("lightbox");
    box.innerHTML = "";
    box.appendChild(frame(item.images[index], imageBoxes(item, index), true));
    box.appendChild(el("p", {text: item.id + " - " + item.images[index].label + " (click to close)"}));
    box.hidden = false;
  }

  /* ---------- replies and traces: texts/<k>.js, loaded when one is opened ---------- */
  var textChunks = {}, waiting = {};
  window.MMFAITH_TEXTS = function (k, chunk) {
    textChunks[k] = chunk;
    (waiting[k] || []).forEach(function (fn) { fn(chunk); });
    delete waiting[k];
  };
  function withTexts(n, fn) {
    var k = Math.floor(n / D.text_chunk);
    if (textChunks[k]) return fn(textChunks[k]);
    if (!waiting[k]) {
      waiting[k] = [];
      document.body.appendChild(el("script", {src: "explorer/texts/" + k + ".js"}));
    }
    waiting[k].push(fn);
  }
  function lazyDetails(summary, item, model, fill) {
    var body = el("div", {cls: "text"});
    var node = el("details", {}, [el("summary", {text: summary}), body]);
    node.addEventListener("toggle", function () {
      if (!node.open || body.childNodes.length) return;
      withTexts(item._n, function (chunk) { fill(body, ((chunk[item._n] || {})[model]) || {probes: {}, turns: []}); });
    });
    return node;
  }

  /* ---------- item card ---------- */
  function modelBlock(item, name, mv) {
    var rows = mv.probes.map(function (p) {
      var c = probeClass(p);
      return el("tr", {}, [el("td", {text: p.name}), el("td", {text: p.answer == null ? "-" : p.answer}),
        el("td", {text: p.status}), el("td", {cls: c === "right" ? "ok" : c === "wrong" ? "bad" : "", text: c})]);
    });
    var table = el("table", {cls: "probes"}, [el("tr", {}, [el("th", {text: "probe"}), el("th", {text: "answer"}),
      el("th", {text: "status"}), el("th", {text: "verdict"})])].concat(rows));
    var parts = Object.keys(mv.parts).filter(function (k) { return mv.parts[k] !== null; })
      .map(function (k) { return el("span", {cls: "chip", text: k + " " + fmt(mv.parts[k])}); });
    var replies = mv.probes.filter(function (p) { return p.text; }).map(function (p) {
      return lazyDetails("reply: " + p.name, item, name, function (body, texts) {
        body.appendChild(el("pre", {text: texts.probes[p.name] || ""}));
      });
    });
    if (mv.turns) replies.push(lazyDetails("trace: " + mv.turns + " turns", item, name, function (body, texts) {
      texts.turns.forEach(function (t, i) { body.appendChild(el("pre", {text: (i + 1) + ". " + t.role + ": " + t.text})); });
    }));
    return el("div", {cls: "model"}, [
      el("h4", {}, [name + " ", el("span", {cls: "verdict " + mv.verdict, text: mv.verdict})]),
      table,
      el("div", {}, mv.flags.map(function (f) { return el("span", {cls: "chip flag", text: f}); })),
      el("div", {cls: "parts"}, parts.length ? [el("span", {text: "part in: "})].concat(parts) : [])
    ].concat(replies));
  }
  function card(item) {
    var figs = item.images.map(function (shown, i) {
      var f = frame(shown, imageBoxes(item, i), false);
      f.addEventListener("click", function () { openLightbox(item, i); });
      return f;
    });
    var facets = Object.keys(item.facets || {}).map(function (k) { return el("span", {cls: "chip", text: k + ": " + item.facets[k]}); });
    var models = D.models.filter(function (m) { return item.models[m]; }).map(function (m) { return modelBlock(item, m, item.models[m]); });
    return el("article", {cls: "item", "data-id": item.id}, [
      el("div", {cls: "images"}, figs),
      el("div", {}, [el("h3", {text: item.id}), el("div", {}, facets), el("div", {cls: "question", text: item.title}),
        item.options.length ? el("div", {cls: "options", text: item.options.join("   ")}) : null,
        el("div", {cls: "gold", text: "gold: " + item.gold}), el("div", {cls: "models"}, models)])
    ]);
  }

  /* ---------- filters form ---------- */
  function select(name, label, values, current, labels) {
    var sel = el("select", {name: name});
    values.forEach(function (v, i) {
      var o = el("option", {value: v, text: labels ? labels[i] : (v || "any")});
      if (v === current) o.selected = true;
      sel.appendChild(o);
    });
    sel.addEventListener("change", function () { var s = readState(); setField(s, name, sel.value); s.page = 0; go(s); });
    return el("label", {}, [label, sel]);
  }
  function setField(s, name, value) { if (name.indexOf("f.") === 0) s.f[name.slice(2)] = value; else s[name] = value; }
  function buildFilters(s) {
    var form = $("filters");
    form.innerHTML = "";
    var search = el("input", {type: "search", name: "q", placeholder: "item id contains", value: s.q});
    search.addEventListener("change", function () { var t = readState(); t.q = search.value; t.page = 0; go(t); });
    form.appendChild(el("label", {}, ["search id", search]));
    form.appendChild(select("verdict", "verdict", ["", "right", "wrong", "unanswered", "failed"], s.verdict));
    form.appendChild(select("probe", "of probe", [""].concat(probeNames), s.probe, ["item (all probes)"].concat(probeNames)));
    if (D.models.length > 1) {
      form.appendChild(select("model", "model", [""].concat(D.models), s.model, ["any model"].concat(D.models)));
      form.appendChild(select("disagree", "models", ["", "1"], s.disagree, ["all items", "disagree"]));
    }
    if (flagNames.length) form.appendChild(select("flag", "flag / flip", [""].concat(flagNames), s.flag));
    Object.keys(facetValues).sort().forEach(function (k) {
      form.appendChild(select("f." + k, k, [""].concat(Object.keys(facetValues[k]).sort()), s.f[k] || ""));
    });
    var metrics = [""].concat(D.metrics.map(function (r) { return r.key; }).filter(function (k, i, a) { return a.indexOf(k) === i; }));
    form.appendChild(select("metric", "in metric", metrics, s.metric));
    form.appendChild(select("sort", "sort", ["", "id", "verdict"], s.sort, ["dataset order", "id", "verdict (failed first)"]));
    var clear = el("button", {type: "button", cls: "clear", text: "clear filters"});
    clear.addEventListener("click", function () { location.hash = ""; });
    form.appendChild(clear);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
  }

  /* ---------- metrics table ---------- */
  function metricHref(row) {
    var s = {q: "", verdict: "", probe: "", model: "", flag: "", metric: row.key, disagree: "", sort: "", page: 0, f: {}};
    for (var k in row.scope) s.f[k] = row.scope[k];
    return hashOf(s);
  }
  function buildMetrics() {
    if (!D.metrics.length) return;
    var sec = $("metrics");
    sec.hidden = false;
    var head = el("tr", {}, [el("th", {text: "metric"}), el("th", {text: "better"})]
      .concat(D.models.map(function (m) { return el("th", {text: m}); })));
    var rows = D.metrics.map(function (r) {
      var scope = Object.keys(r.scope).map(function (k) { return r.scope[k]; }).join(", ");
      var cells = D.models.map(function (m) {
        var v = r.values[m], ci = r.ci95[m], why = r.na_reason[m];
        var link = el("a", {cls: "metric", href: metricHref(r), "data-metric": r.key, text: fmt(v)});
        return el("td", {cls: "num", title: why || ""}, [link, ci ? el("span", {cls: "ci", text: " [" + fmt(ci[0]) + ", " + fmt(ci[1]) + "]"}) : null,
          v == null && why ? el("div", {cls: "meaning", text: why}) : null]);
      });
      return el("tr", {}, [el("td", {}, [(scope ? scope + ": " : "") + r.name, el("div", {cls: "meaning", text: r.meaning})]),
        el("td", {text: r.better})].concat(cells));
    });
    sec.appendChild(el("h2", {text: "Metrics (each number links to the items behind it)"}));
    sec.appendChild(el("table", {id: "metrics-table"}, [head].concat(rows)));
  }

  /* ---------- leaderboard (evaluate profiles) ---------- */
  function buildLeaderboard() {
    var sec = $("leaderboard");
    sec.hidden = false;
    sec.appendChild(el("h2", {text: "Leaderboard per family"}));
    D.leaderboard.forEach(function (board) {
      var keys = [];
      board.rows.forEach(function (r) { r.headline.forEach(function (h) { if (keys.indexOf(h.key) < 0) keys.push(h.key); }); });
      var names = {};
      board.rows.forEach(function (r) { r.headline.forEach(function (h) { names[h.key] = h.name + (h.better ? " (" + h.better + " better)" : ""); }); });
      var head = el("tr", {}, [el("th", {text: "model"}), el("th", {text: "status"}), el("th", {text: "parse rate"})]
        .concat(keys.map(function (k) { return el("th", {text: names[k]}); })).concat([el("th", {text: "items"})]));
      var rows = board.rows.map(function (r) {
        var cells = keys.map(function (k) {
          var h = r.headline.filter(function (x) { return x.key === k; })[0];
          if (!h) return el("td", {text: "-"});
          return el("td", {cls: "num", title: h.na_reason || ""}, [fmt(h.value),
            h.ci95 ? el("span", {cls: "ci", text: " [" + fmt(h.ci95[0]) + ", " + fmt(h.ci95[1]) + "]"}) : null,
            h.value == null && h.na_reason ? el("div", {cls: "meaning", text: h.na_reason}) : null]);
        });
        return el("tr", {}, [el("td", {text: r.model}), el("td", {text: r.status + (r.error ? ": " + r.error : "")}),
          el("td", {cls: "num", text: fmt(r.parse_rate)})].concat(cells)
          .concat([el("td", {}, [r.link ? el("a", {href: r.link, text: "explore"}) : "-"])]));
      });
      sec.appendChild(el("h2", {text: board.title}));
      sec.appendChild(el("table", {cls: "board", "data-family": board.family}, [head].concat(rows)));
    });
  }

  /* ---------- render ---------- */
  var built = false;
  function render() {
    var s = readState();
    if (!built) { buildFilters(s); built = true; } else syncFilters(s);
    var shown = sortItems(D.items.filter(function (item) { return matches(item, s); }), s);
    var pages = Math.max(1, Math.ceil(shown.length / PAGE)), page = Math.min(s.page, pages - 1);
    $("count").textContent = shown.length + " of " + D.items.length + " items";
    $("count").setAttribute("data-count", shown.length);
    $("active").textContent = s.metric ? "(the items counted in " + s.metric + ")" : "";
    var list = $("items");
    list.innerHTML = "";
    shown.slice(page * PAGE, (page + 1) * PAGE).forEach(function (item) { list.appendChild(card(item)); });
    if (!shown.length) list.appendChild(el("p", {cls: "empty", text: "No item matches these filters."}));
    ["pager-top", "pager-bottom"].forEach(function (id) { pager($(id), page, pages); });
    document.body.setAttribute("data-renders", String((parseInt(document.body.getAttribute("data-renders"), 10) || 0) + 1));
  }
  function syncFilters(s) {
    Array.prototype.forEach.call($("filters").elements, function (input) {
      if (!input.name) return;
      var v = input.name.indexOf("f.") === 0 ? (s.f[input.name.slice(2)] || "") : (s[input.name] || "");
      if (input.value !== v) input.value = v;
    });
  }
  function pager(nav, page, pages) {
    nav.innerHTML = "";
    if (pages < 2) return;
    var prev = el("button", {type: "button", text: "previous"}), next = el("button", {type: "button", text: "next"});
    prev.disabled = page === 0; next.disabled = page >= pages - 1;
    prev.addEventListener("click", function () { var s = readState(); s.page = page - 1; go(s); });
    next.addEventListener("click", function () { var s = readState(); s.page = page + 1; go(s); });
    nav.appendChild(prev); nav.appendChild(next);
    nav.appendChild(el("span", {text: " page " + (page + 1) + " of " + pages}));
  }

  $("title").textContent = D.title || "mmfaith explorer";
  $("subtitle").textContent = D.kind === "profile" ? "evaluate profiles"
    : (D.family_title || "") + " - " + D.items.length + " items, " + D.models.length + " model" + (D.models.length === 1 ? "" : "s");
  $("lightbox").addEventListener("click", function () { $("lightbox").hidden = true; });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") $("lightbox").hidden = true; });
  if (D.kind === "profile") buildLeaderboard();
  else {
    buildMetrics();
    $("browser").hidden = false;
    window.addEventListener("hashchange", render);
    render();
  }
  window.MMFAITH_READY_MS = performance.now();
  window.MMFAITH_TIMES = {data_parsed: T0, unpacked: T1, ready: window.MMFAITH_READY_MS};
  document.body.setAttribute("data-ready", "1");
})();
