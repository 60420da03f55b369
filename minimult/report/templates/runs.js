// The site's interactive parts, offline (no server, no network): a run page's training curves (inline SVG from its
// <script id="curve-data">), runs.html (filter the table of every run, tick runs to overlay their training curves,
// hover for values, and list where their configs differ; the data is its <script id="run-data">) and claims.html
// (show the claims of the verdicts ticked).
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function fmt(v) { return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3); }

  // One plot: `series` [{name, color, dash, points: [[step, value], ...]}] on shared axes; `logOK`: a log scale when
  // the values span more than 20x (perplexities). Hovering shows the point nearest the pointer. null: nothing to draw.
  function chart(label, series, logOK) {
    series = series.filter(function (s) { return s.points.length; });
    if (!series.length) { return null; }
    var W = 560, H = 300, L = 58, R = 12, T = 22, B = 36;
    var xs = [], ys = [];
    series.forEach(function (s) { s.points.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); }); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var logY = logOK && y0 > 0 && y1 / y0 > 20;
    var small = Math.max(Math.abs(y0), Math.abs(y1)) < 0.01;  // a learning rate: ticks as 2.0e-3
    var fy = logY ? Math.log : function (v) { return v; };
    var a = fy(y0), b = fy(y1);
    if (a === b) { a -= 0.5; b += 0.5; }
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    var X = function (v) { return L + (v - x0) / (x1 - x0) * (W - L - R); };
    var Y = function (v) { return H - B - (fy(v) - a) / (b - a) * (H - T - B); };
    var fig = document.createElement("figure");
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": label}, fig);
    el("text", {x: L, y: 14, "font-size": 13, "font-weight": 600}, svg).textContent = label + (logY ? " (log scale)" : "");
    el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888"}, svg);
    el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#888"}, svg);
    for (var k = 0; k <= 4; k++) {
      var yv = logY ? Math.exp(a + (b - a) * k / 4) : a + (b - a) * k / 4;
      var yy = Y(yv);
      el("line", {x1: L, y1: yy, x2: W - R, y2: yy, stroke: "#eee"}, svg);
      el("text", {x: L - 4, y: yy + 4, "font-size": 10, "text-anchor": "end"}, svg).textContent = small ?
        yv.toExponential(1) : fmt(yv);
      var xv = x0 + (x1 - x0) * k / 4;
      el("text", {x: X(xv), y: H - B + 14, "font-size": 10, "text-anchor": "middle"}, svg).textContent = Math.round(xv);
    }
    el("text", {x: (L + W - R) / 2, y: H - 4, "font-size": 11, "text-anchor": "middle"}, svg).textContent = "update (step)";
    var tip = document.createElement("div");
    tip.className = "tip";
    series.forEach(function (s) {
      var d = s.points.map(function (p, i) { return (i ? "L" : "M") + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); }).join(" ");
      el("path", {d: d, fill: "none", stroke: s.color, "stroke-width": 1.6, "stroke-dasharray": s.dash}, svg);
      if (s.points.length <= 100) {  // a few evaluations: a dot each; a long loss curve: the line alone
        s.points.forEach(function (p) { el("circle", {cx: X(p[0]), cy: Y(p[1]), r: 3, fill: s.color}, svg); });
      }
    });
    var mark = el("circle", {r: 5, fill: "none", stroke: "#1d232a", "stroke-width": 1.5, visibility: "hidden"}, svg);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var mx = (ev.clientX - box.left) / box.width * W, my = (ev.clientY - box.top) / box.height * H;
      var best = null;
      series.forEach(function (s) {
        s.points.forEach(function (p) {
          var dist = Math.pow(X(p[0]) - mx, 2) + Math.pow(Y(p[1]) - my, 2);
          if (!best || dist < best.dist) { best = {dist: dist, s: s, p: p}; }
        });
      });
      mark.setAttribute("cx", X(best.p[0]));
      mark.setAttribute("cy", Y(best.p[1]));
      mark.setAttribute("visibility", "visible");
      tip.textContent = (best.s.name ? best.s.name + ": " : "") + label + " = " + best.p[1] + " at step " + best.p[0];
    });
    fig.appendChild(tip);
    if (series.length > 1 || series[0].name) {
      var legend = document.createElement("div");
      legend.className = "legend";
      series.forEach(function (s) {
        var span = document.createElement("span");
        span.innerHTML = "<svg width='18' height='8'><line x1='0' y1='4' x2='18' y2='4' stroke='" + s.color +
          "' stroke-width='2' stroke-dasharray='" + s.dash + "'/></svg> ";
        span.appendChild(document.createTextNode(s.name));
        legend.appendChild(span);
      });
      fig.appendChild(legend);
    }
    return fig;
  }

  // a run page: one plot per panel of its curves
  var curveNode = document.getElementById("curve-data");
  if (curveNode) {
    var runBox = document.getElementById("run-curves");
    JSON.parse(curveNode.textContent).forEach(function (panel) {
      var fig = chart(panel.title, [{name: "", color: COLORS[0], dash: "", points: panel.points}], panel.log);
      if (fig) { runBox.appendChild(fig); }
    });
  }

  // claims.html: the verdict checkboxes hide the other rows
  var verdicts = document.querySelectorAll("input.verdict-filter");
  if (verdicts.length) {
    var applyVerdicts = function () {
      var shown = {};
      verdicts.forEach(function (box) { shown[box.value] = box.checked; });
      document.querySelectorAll("tr[data-verdict]").forEach(function (row) {
        row.style.display = shown[row.getAttribute("data-verdict")] === false ? "none" : "";
      });
    };
    verdicts.forEach(function (box) { box.addEventListener("change", applyVerdicts); });
    applyVerdicts();
  }

  var dataNode = document.getElementById("run-data");
  if (!dataNode) { return; }
  var data = JSON.parse(dataNode.textContent);
  var table = document.getElementById("run-table");
  var rows = Array.from(table.tBodies[0].rows);
  var selects = document.querySelectorAll("#run-filters select");
  var text = document.getElementById("run-text");

  function filter() {
    var n = 0;
    var want = text.value.trim().toLowerCase();
    rows.forEach(function (row) {
      var ok = true;
      selects.forEach(function (s) {
        if (s.value && row.getAttribute("data-" + s.getAttribute("data-key")) !== s.value) { ok = false; }
      });
      if (want && row.textContent.toLowerCase().indexOf(want) < 0) { ok = false; }
      row.style.display = ok ? "" : "none";
      n += ok ? 1 : 0;
    });
    document.getElementById("run-count").textContent = n + " of " + rows.length + " shown";
  }
  selects.forEach(function (s) { s.addEventListener("change", filter); });
  text.addEventListener("input", filter);
  filter();

  function diff(picked) {
    var box = document.getElementById("config-diff");
    box.textContent = "";
    if (picked.length < 2) {
      box.textContent = picked.length ? "Tick a second run to compare configurations." : "";
      return;
    }
    var keys = {};
    picked.forEach(function (id) { Object.keys(data.runs[id].config).forEach(function (k) { keys[k] = true; }); });
    var differ = Object.keys(keys).sort().filter(function (k) {
      var first = JSON.stringify(data.runs[picked[0]].config[k]);
      return picked.some(function (id) { return JSON.stringify(data.runs[id].config[k]) !== first; });
    });
    if (!differ.length) { box.textContent = "Their configurations are the same."; return; }
    var t = document.createElement("table");
    t.className = "diff";
    var head = t.createTHead().insertRow();
    ["config key"].concat(picked).forEach(function (h) {
      var th = document.createElement("th"); th.textContent = h; head.appendChild(th);
    });
    var body = t.createTBody();
    differ.forEach(function (k) {
      var r = body.insertRow();
      r.insertCell().textContent = k;
      picked.forEach(function (id) {
        var v = data.runs[id].config[k];
        r.insertCell().textContent = v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v);
      });
    });
    box.appendChild(t);
  }

  function update() {
    var picked = Array.from(document.querySelectorAll("input.pick:checked")).map(function (b) { return b.value; });
    var box = document.getElementById("curves");
    box.textContent = "";
    var drawn = 0;
    Object.keys(data.curves).forEach(function (key) {
      var series = picked.map(function (id, i) {
        return {name: id, color: COLORS[i % COLORS.length], dash: i >= COLORS.length ? "5,3" : "",
                points: data.runs[id].curves[key] || []};
      });
      var fig = chart(data.curves[key], series, key.indexOf("ppl") === 0);
      if (fig) { box.appendChild(fig); drawn += 1; }
    });
    document.getElementById("curve-help").textContent = !picked.length ? "Tick runs in the table above." :
      drawn ? "The evaluations each ticked run logged during training, by update." :
      "The ticked runs logged no evaluations during training (metrics.jsonl).";
    diff(picked);
  }
  document.querySelectorAll("input.pick").forEach(function (b) { b.addEventListener("change", update); });
  update();
})();
