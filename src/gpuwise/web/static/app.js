/* gpuwise page: draws the charts from the JSON the server embeds, copy buttons, short URLs.
   The page works without this file; it only adds charts and convenience. */
(function () {
  "use strict";
  var FONT = getComputedStyle(document.documentElement).getPropertyValue("--font") || "sans-serif";
  var COLORS = { weights: "#2457c5", kv_cache: "#e08a1e", activations: "#8e44ad", gradients: "#c0392b",
    optimizer: "#16794a", overhead: "#7f8c8d", other: "#b7950b", free: "#dfe4ea" };
  var charts = [];

  function memoryChart(el, d) {
    var box = el.parentNode;
    box.style.height = Math.max(160, 70 + 38 * d.labels.length) + "px";
    var sets = d.datasets.map(function (s) {
      return { type: "bar", label: s.label, data: s.data, backgroundColor: COLORS[s.key] || "#999",
        stack: "mem", borderWidth: 0 };
    });
    sets.push({ type: "scatter", label: d.usable.label, data: d.usable.data.map(function (x, i) {
      return { x: x, y: d.labels[i] }; }), pointStyle: "line", rotation: 90, radius: 14,
      borderWidth: 3, borderColor: "#1d232b", backgroundColor: "#1d232b" });
    return new Chart(el, { data: { labels: d.labels, datasets: sets }, options: {
      indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { stacked: true, title: { display: true, text: "GiB" }, beginAtZero: true },
                y: { stacked: true, type: "category", ticks: { callback: function (v) {
                  var s = this.getLabelForValue(v), max = box.clientWidth < 500 ? 16 : 40;
                  return s.length > max ? s.slice(0, max - 1) + "…" : s; } } } },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } },
        tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ": " + (c.parsed.x || 0).toFixed(1) + " GiB"; } } } } } });
  }

  /* Labels beside the points: the first free spot of right, left, above, below; inside the plot
     area; never over another label (a label that finds no spot is left to the tooltip). */
  function overlaps(a, b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
  }
  var pointLabels = { id: "gwPointLabels", afterDatasetsDraw: function (chart) {
    var ctx = chart.ctx, area = chart.chartArea, placed = [];
    ctx.save(); ctx.font = "11px " + FONT.trim(); ctx.textBaseline = "top";
    chart.data.datasets.forEach(function (set, di) {
      if (set.type === "line") { return; }
      chart.getDatasetMeta(di).data.forEach(function (pt, i) {
        var raw = set.data[i], text = raw.front ? raw.label : raw.short;
        var w = ctx.measureText(text).width + 2, h = 13, r = 9;
        var spots = [[pt.x + r, pt.y - h / 2], [pt.x - r - w, pt.y - h / 2], [pt.x - w / 2, pt.y - r - h],
                     [pt.x - w / 2, pt.y + r]];
        for (var k = 0; k < spots.length; k++) {
          var box = { x: spots[k][0], y: spots[k][1], w: w, h: h };
          var inside = box.x >= area.left && box.x + w <= area.right && box.y >= area.top && box.y + h <= area.bottom;
          if (inside && !placed.some(function (p) { return overlaps(p, box); })) {
            placed.push(box); ctx.fillStyle = raw.front ? "#1d232b" : "#5d6875";
            ctx.fillText(text, box.x + 1, box.y); break;
          }
        }
      });
    });
    ctx.restore(); } };

  function scatterChart(el, d) {
    var front = d.points.filter(function (p) { return p.front; }).sort(function (a, b) { return a.x - b.x; });
    var rest = d.points.filter(function (p) { return !p.front; });
    return new Chart(el, { type: "scatter", plugins: [pointLabels], data: { datasets: [
      { type: "line", label: d.front_label, data: front, borderColor: "#16794a", borderWidth: 2,
        stepped: "before", pointRadius: 0, fill: false },
      { label: d.front_label, data: front, backgroundColor: "#16794a", radius: 7, hoverRadius: 9 },
      { label: d.other_label, data: rest, backgroundColor: "#9aa5b1", radius: 5, hoverRadius: 7 }] },
      options: { responsive: true, maintainAspectRatio: false, animation: false,
      layout: { padding: { top: 8, right: 12 } },
      scales: { x: { title: { display: true, text: d.x }, beginAtZero: true, grace: "12%" },
                y: { title: { display: true, text: d.y }, beginAtZero: true, grace: "12%" } },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12,
          filter: function (item) { return item.datasetIndex !== 0; } } },
        tooltip: { filter: function (c) { return c.dataset.type !== "line"; }, callbacks: { label: function (c) {
          return c.raw.label + ": " + c.raw.x + " / h, " + Math.round(c.raw.y) + " tok/s"; } } } } } });
  }

  function draw() {
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    var data = document.getElementById("chart-data");
    if (!data || typeof Chart === "undefined") { return; }
    Chart.defaults.font.family = FONT.trim();
    var d = JSON.parse(data.textContent);
    var mem = document.getElementById("memory-chart");
    if (mem && d.memory.labels.length) { charts.push(memoryChart(mem, d.memory)); }
    var sc = document.getElementById("scatter-chart");
    if (sc && d.scatter.points.length) { charts.push(scatterChart(sc, d.scatter)); }
    document.body.setAttribute("data-charts", String(charts.length));
  }

  function copy(btn) {
    var pre = document.getElementById(btn.getAttribute("data-copy"));
    if (!pre) { return; }
    var text = pre.textContent, done = function () {
      var label = btn.textContent; btn.textContent = btn.getAttribute("data-done");
      setTimeout(function () { btn.textContent = label; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(text); done(); });
    } else { fallback(text); done(); }
  }

  function fallback(text) {  /* plain http on a LAN address: no Clipboard API */
    var ta = document.createElement("textarea");
    ta.value = text; ta.setAttribute("readonly", ""); ta.className = "offscreen";
    document.body.appendChild(ta); ta.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    document.body.removeChild(ta);
  }

  function langLink() {  /* keep the language switch pointing at the current result */
    var a = document.getElementById("lang-switch");
    if (!a) { return; }
    var params = new URLSearchParams(window.location.search);
    params.set("lang", a.getAttribute("hreflang"));
    a.setAttribute("href", "/?" + params.toString());
  }

  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("button.copy");
    if (btn) { copy(btn); }
  });
  document.addEventListener("htmx:configRequest", function (e) {  /* short, shareable URLs */
    var fd = e.detail.formData, empty = [];
    if (!fd) { return; }
    fd.forEach(function (v, k) { if (v === "") { empty.push(k); } });
    empty.forEach(function (k) { fd.delete(k); });
  });
  document.addEventListener("htmx:afterSettle", draw);
  document.addEventListener("htmx:historyRestore", draw);
  document.addEventListener("htmx:pushedIntoHistory", langLink);
  document.addEventListener("DOMContentLoaded", function () {
    /* without htmx, drop empty fields from the plain GET form as well */
    var form = document.getElementById("workload");
    if (form && typeof htmx === "undefined") {
      form.addEventListener("submit", function () {
        Array.prototype.forEach.call(form.elements, function (el) {
          if (el.name && el.value === "") { el.disabled = true; } });
      });
    }
    draw();
  });
})();
