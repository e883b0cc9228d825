// heatmap_viewer.js: the interactive twin of a course heat map (course/interactive.hpp writes
// it into every <name>.html beside <name>.png, with the figure's numbers in a JSON block).
// Plain browser JavaScript, no library, no network: the file opens from a learner's disk.
//
// One map at a time on a canvas (a drop-down picks the layer, head or panel); hovering a cell,
// or moving the highlighted cell with the arrow keys, shows its row and column with their
// labels (query and key tokens), its value and, where the figure has them, the score before the
// softmax. Blocked cells are grey and hatched, as in the PNG. Thousands of rows stay usable: a
// cell is drawn at least three pixels wide and the map scrolls inside its box.
'use strict';

(function () {
  const data = JSON.parse(document.getElementById('figure-data').textContent);
  const canvas = document.getElementById('map');
  const readout = document.getElementById('readout');
  const picker = document.getElementById('panel');
  const bar = document.getElementById('colorbar');
  const mark = document.getElementById('cursor');  // the outline on the cell being read
  const ctx = canvas.getContext('2d');

  // viridis, the PNG's palette: nine anchors from dark purple (low) to yellow (high).
  const viridis = ['#440154', '#472c7a', '#3b518b', '#2c718e', '#21908d', '#27ad81', '#5cc863',
                   '#aadc32', '#fde725'].map((h) => [1, 3, 5].map((i) => parseInt(h.substr(i, 2), 16)));
  function colour(t) {  // t in [0, 1]
    const x = Math.min(Math.max(t, 0), 1) * 8, i = Math.min(Math.floor(x), 7), f = x - i;
    const c = viridis[i].map((v, k) => Math.round(v + f * (viridis[i + 1][k] - v)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  // Numbers arrive as JSON numbers, or as the strings "inf", "-inf" and "nan", which JSON lacks.
  const number = (v) => (typeof v === 'number' ? v : v === 'inf' ? Infinity :
                         v === '-inf' ? -Infinity : NaN);
  function shown(v) {
    const x = number(v);
    if (Number.isNaN(x)) return 'NaN';
    if (!Number.isFinite(x)) return x > 0 ? '+\u221e' : '\u2212\u221e';
    return String(v);  // the digits the course wrote, not a re-rounding of them
  }

  let panel = null, px = 1, left = 0, top = 0, lo = 0, hi = 1, cursor = null;

  function range(p) {
    if (data.cmin !== null && data.cmax !== null) return [data.cmin, data.cmax];
    let a = Infinity, b = -Infinity;
    p.values.forEach((v, k) => {
      const x = number(v);
      if (Number.isFinite(x) && (!p.allowed || p.allowed[k])) { a = Math.min(a, x); b = Math.max(b, x); }
    });
    return a <= b ? [a, b === a ? a + 1 : b] : [0, 1];
  }

  function draw() {
    panel = data.panels[Number(picker.value)];
    [lo, hi] = range(panel);
    // Cells as large as fit 640 px (up to 40 px), but at least 3 px, so that a pointer can
    // rest on one: a map of a thousand tokens is 3,000 px wide and scrolls in its box.
    px = Math.max(3, Math.min(40, Math.floor(640 / Math.max(panel.rows, panel.cols))));
    const labelled = px >= 10;
    ctx.font = '12px sans-serif';
    const widest = (tics) => tics.reduce((w, t) => Math.max(w, ctx.measureText(t).width), 0);
    left = labelled ? Math.ceil(widest(panel.ytics)) + 8 : 0;
    top = labelled ? Math.ceil(widest(panel.xtics)) + 8 : 0;
    mark.style.display = 'none';
    canvas.width = left + panel.cols * px;
    canvas.height = top + panel.rows * px;
    canvas.dataset.cellPx = px;  // the geometry, for the course's browser test
    canvas.dataset.left = left;
    canvas.dataset.top = top;
    ctx.font = '12px sans-serif';
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    for (let i = 0; i < panel.rows; ++i) {
      for (let j = 0; j < panel.cols; ++j) {
        const k = i * panel.cols + j, x = number(panel.values[k]);
        const blocked = panel.allowed && !panel.allowed[k];
        ctx.fillStyle = blocked ? '#d0d0d0' : Number.isFinite(x) ? colour((x - lo) / (hi - lo)) : '#fff';
        ctx.fillRect(left + j * px, top + i * px, px, px);
        if (blocked && px >= 4) {  // the PNG's hatching: one diagonal per cell
          ctx.strokeStyle = '#909090';
          ctx.beginPath();
          ctx.moveTo(left + j * px, top + (i + 1) * px);
          ctx.lineTo(left + (j + 1) * px, top + i * px);
          ctx.stroke();
        }
      }
    }
    if (labelled) {
      ctx.fillStyle = '#000';
      ctx.textBaseline = 'middle';
      ctx.textAlign = 'right';
      panel.ytics.forEach((t, i) => ctx.fillText(t, left - 4, top + (i + 0.5) * px));
      ctx.save();
      ctx.rotate(-Math.PI / 2);  // column labels read upwards, as the PNG's
      ctx.textAlign = 'left';
      panel.xtics.forEach((t, j) => ctx.fillText(t, -top + 4, left + (j + 0.5) * px));
      ctx.restore();
    }
    bar.innerHTML = '';
    for (let s = 0; s <= 10; ++s) {
      const stop = document.createElement('span');
      stop.style.background = colour(s / 10);
      stop.textContent = s === 0 ? shown(+lo.toPrecision(3)) : s === 10 ? shown(+hi.toPrecision(3)) : '';
      bar.appendChild(stop);
    }
    if (cursor) show(cursor[0], cursor[1]);
  }

  function show(i, j) {
    if (i < 0 || j < 0 || i >= panel.rows || j >= panel.cols) return;
    cursor = [i, j];
    const k = i * panel.cols + j, base = data.first_index;
    const name = (label, tics, n) => `${label} ${n + base}${tics.length ? ` \u201c${tics[n]}\u201d` : ''}`;
    let text = `${name(data.ylabel || 'row', panel.ytics, i)} \u00b7 ${name(data.xlabel || 'column', panel.xtics, j)}` +
               ` \u00b7 ${data.value_name} ${shown(panel.values[k])}`;
    if (panel.scores) text += ` \u00b7 score before softmax ${shown(panel.scores[k])}`;
    if (panel.allowed && !panel.allowed[k]) text += ' \u00b7 blocked by the mask';
    readout.textContent = text;
    readout.dataset.row = i;
    readout.dataset.col = j;
    Object.assign(mark.style, {display: 'block', left: `${left + j * px - 1}px`,
                               top: `${top + i * px - 1}px`, width: `${px}px`, height: `${px}px`});
  }

  canvas.addEventListener('mousemove', (e) => {
    const r = canvas.getBoundingClientRect();
    show(Math.floor((e.clientY - r.top - top) / px), Math.floor((e.clientX - r.left - left) / px));
  });
  canvas.addEventListener('keydown', (e) => {
    const [i, j] = cursor || [0, 0];
    const step = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]}[e.key];
    if (!step) return;
    e.preventDefault();
    show(Math.min(Math.max(i + step[0], 0), panel.rows - 1), Math.min(Math.max(j + step[1], 0), panel.cols - 1));
  });
  data.panels.forEach((p, n) => picker.add(new Option(p.title || `map ${n + 1}`, String(n))));
  picker.parentElement.hidden = data.panels.length < 2;
  picker.addEventListener('change', draw);
  draw();
})();
