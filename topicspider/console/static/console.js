// The console's live crawl view and local times. Text from crawled pages only ever
// reaches the page through textContent, never as markup.
"use strict";

function showLocalTimes(root) {
  for (const node of root.querySelectorAll("time[data-unix]")) {
    node.textContent = new Date(Number(node.dataset.unix) * 1000).toLocaleString();
  }
}

function setText(id, value) {
  const node = document.getElementById(id);
  if (node) node.textContent = String(value);
}

function fillRows(id, rows) {
  const body = document.getElementById(id);
  if (!body) return;
  body.replaceChildren(...rows.map((cells) => {
    const row = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = String(cell);
      row.append(td);
    }
    return row;
  }));
}

function prepare(canvas) {
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  context.font = "12px system-ui, sans-serif";
  context.fillStyle = "#5b6573";
  context.strokeStyle = "#d9dee5";
  return context;
}

const LINE_COLOURS = ["#1f6feb", "#1a7f37", "#b42318", "#8250df", "#bf8700", "#0a7ea4"];
const PAD = { left: 44, right: 12, top: 12, bottom: 26 };

// Pages per second between successive samples, per worker.
function rates(points) {
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const [t0, f0] = points[i - 1], [t1, f1] = points[i];
    if (t1 > t0) out.push([t1, (f1 - f0) / (t1 - t0)]);
  }
  return out;
}

function drawRateChart(canvas, series) {
  const context = prepare(canvas);
  const lines = series.map((s) => rates(s.points));
  const all = lines.flat();
  const width = canvas.width - PAD.left - PAD.right, height = canvas.height - PAD.top - PAD.bottom;
  if (!all.length) { context.fillText("waiting for data…", PAD.left, PAD.top + 20); return; }
  const tMin = Math.min(...all.map((p) => p[0])), tMax = Math.max(...all.map((p) => p[0]));
  const yMax = Math.max(1, ...all.map((p) => p[1])) * 1.1;
  const x = (t) => PAD.left + (tMax > tMin ? (t - tMin) / (tMax - tMin) : 1) * width;
  const y = (v) => PAD.top + height - (v / yMax) * height;
  context.beginPath();
  for (const v of [0, yMax / 2, yMax]) {
    context.moveTo(PAD.left, y(v)); context.lineTo(PAD.left + width, y(v));
    context.fillText(v.toFixed(v < 10 ? 1 : 0), 4, y(v) + 4);
  }
  context.stroke();
  context.fillText(`${Math.round(tMin)} s`, PAD.left, canvas.height - 8);
  context.fillText(`${Math.round(tMax)} s since start`, PAD.left + width - 110, canvas.height - 8);
  lines.forEach((line, index) => {
    context.strokeStyle = LINE_COLOURS[index % LINE_COLOURS.length];
    context.lineWidth = 2;
    context.beginPath();
    line.forEach(([t, v], i) => (i ? context.lineTo(x(t), y(v)) : context.moveTo(x(t), y(v))));
    context.stroke();
  });
  context.lineWidth = 1;
}

function drawHistogram(canvas, histogram) {
  const context = prepare(canvas);
  const width = canvas.width - PAD.left - PAD.right, height = canvas.height - PAD.top - PAD.bottom;
  if (!histogram.length) { context.fillText("no page scored yet", PAD.left, PAD.top + 20); return; }
  const most = Math.max(...histogram.map((pair) => pair[1]));
  const slot = width / histogram.length;
  histogram.forEach(([bucket, count], index) => {
    const barHeight = (count / most) * (height - 14);
    const left = PAD.left + index * slot + 2;
    context.fillStyle = "#1f6feb";
    context.fillRect(left, PAD.top + height - barHeight, Math.max(2, slot - 4), barHeight);
    context.fillStyle = "#5b6573";
    context.fillText(String(count), left, PAD.top + height - barHeight - 3);
    context.fillText(String(bucket), left, canvas.height - 8);
  });
}

function render(view) {
  setText("state", view.state);
  if ("process" in view) setText("process", view.process);
  const failure = document.getElementById("failure");
  if (failure) { failure.textContent = view.failure || ""; failure.hidden = !view.failure; }
  if (view.updated) setText("updated", new Date(view.updated * 1000).toLocaleString());
  for (const [name, value] of Object.entries(view.counts)) setText(`count-${name}`, value);
  setText("rate", view.rate);
  setText("queued", view.queued);
  fillRows("queue", view.queue);
  fillRows("downloading", view.downloading);
  fillRows("errors", view.errors);
  drawRateChart(document.getElementById("rate-chart"), view.series);
  drawHistogram(document.getElementById("histogram"), view.histogram);
}

function watch(section) {
  const every = Number(section.dataset.refresh) || 2000;
  const refresh = async () => {
    try {
      const answer = await fetch(section.dataset.api, { headers: { Accept: "application/json" } });
      if (answer.ok) render(await answer.json());
    } catch (error) {
      console.warn("console: refresh failed", error);
    }
  };
  refresh();
  setInterval(refresh, every);
}

document.addEventListener("DOMContentLoaded", () => {
  showLocalTimes(document);
  const section = document.getElementById("crawl");
  if (section) watch(section);
});
