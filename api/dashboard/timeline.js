// Timeline: a Gantt chart per core on a canvas. Bars are kept in a bounded
// list (the oldest go first) and only those inside the visible window are
// drawn, so a job of 100,000+ tasks costs the page a fixed amount.
'use strict';

class Timeline {
  constructor(canvas, tooltip, maxBars) {
    this.canvas = canvas;
    this.tooltip = tooltip;
    this.maxBars = maxBars || 20000;
    this.bars = [];            // {job, run, core, t0, t1 (0 = open), name, sub, failed}
    this.byKey = new Map();    // "job:run" -> newest bar of that run
    this.open = new Map();     // "job:run" -> bar dispatched, not ended
    this.rows = [];            // [{core, label}]
    this.rowOf = new Map();    // core id -> row index
    this.job = null;           // job shown
    this.windowS = 10;         // 0: whole job
    this.serverNow = 0;        // controller clock (us) at lastLocal
    this.lastLocal = 0;
    this.ended = false;        // shown job has ended: fit it
    this.hits = [];
    this.painted = new Set();
    canvas.addEventListener('mousemove', (e) => this.hover(e));
    canvas.addEventListener('mouseleave', () => { this.tooltip.hidden = true; });
  }

  setRows(rows) {
    this.rows = rows;
    this.rowOf = new Map(rows.map((r, i) => [r.core, i]));
  }

  setClock(nowUs) { this.serverNow = nowUs; this.lastLocal = performance.now(); }
  now() { return this.serverNow + (performance.now() - this.lastLocal) * 1000; }

  // One record of the "tasks" event: [job, run, phase, core, device, t0, t1, id, sub];
  // phase 0 dispatched, 1 done, 2 failed, 3 failed and runs again.
  add(rec) {
    const [job, run, phase, core, , t0, t1, name, sub] = rec;
    const key = job + ':' + run;
    let bar = this.byKey.get(key);
    if (phase === 0) {
      // Known run: a start that arrives after its end (the end came from the
      // task table first), or a retry, whose end updates the same bar.
      if (bar) return;
      bar = { job, run, core, t0, t1: 0, name, sub, failed: false };
      this.byKey.set(key, bar);
      this.open.set(key, bar);
      this.push(bar);
      return;
    }
    if (!bar) {
      bar = { job, run, core, name, sub };
      this.byKey.set(key, bar);
      this.push(bar);
    }
    this.open.delete(key);
    bar.t0 = t0; bar.t1 = t1; bar.core = core; bar.failed = phase >= 2;
  }

  push(bar) {
    this.bars.push(bar);
    if (this.bars.length > this.maxBars) {
      const gone = this.bars.splice(0, this.bars.length - this.maxBars);
      for (const b of gone) {
        const key = b.job + ':' + b.run;
        if (this.byKey.get(key) === b) { this.byKey.delete(key); this.open.delete(key); }
      }
    }
  }

  // The job ended: runs still open (cancelled, or lost) are dropped.
  endJob(job) {
    for (const [k, b] of this.open) {
      if (b.job !== job) continue;
      this.open.delete(k);
      this.byKey.delete(k);
    }
    this.bars = this.bars.filter((b) => b.job !== job || b.t1);
  }

  barsOf(job) { return this.bars.filter((b) => b.job === job); }

  // Which core runs what now: core id -> bar.
  running() {
    const m = new Map();
    for (const b of this.open.values()) m.set(b.core, b);
    return m;
  }

  static color(s) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
    return 'hsl(' + (h % 360) + ',62%,' + (42 + (h >> 9) % 14) + '%)';
  }

  // How a bar is painted: its sub-model's colour, faded while it runs, or
  // the failed colour. draw() and legend() both read this, so the legend
  // names exactly the colours the chart uses.
  static style(b) {
    if (b.failed) return { color: Timeline.FAILED, alpha: 1 };
    return { color: Timeline.color(b.sub || ''), alpha: b.t1 ? 1 : Timeline.RUNNING_ALPHA };
  }

  // The legend of the shown job: one entry per sub-model of its bars, with
  // a swatch for its done runs and one for its running runs, and one entry
  // for failed runs. Each entry is {label, swatches: [{title, color, alpha}]}.
  legend() {
    const subs = [...new Set(this.job == null ? [] : this.barsOf(this.job).map((b) => b.sub || ''))].sort();
    const swatch = (title, bar) => { const st = Timeline.style(bar); return { title, color: st.color, alpha: st.alpha }; };
    const out = subs.map((s) => ({ label: s || '(no sub-model)',
                                   swatches: [swatch('done', { sub: s, t1: 1 }), swatch('running', { sub: s, t1: 0 })] }));
    out.push({ label: 'failed', swatches: [swatch('failed', { failed: true })] });
    return out;
  }

  view() {
    const bars = this.job == null ? [] : this.barsOf(this.job);
    let hi = this.now(), lo;
    if (this.windowS === 0 || this.ended) {
      lo = Infinity; hi = -Infinity;
      for (const b of bars) { lo = Math.min(lo, b.t0); hi = Math.max(hi, b.t1 || this.now()); }
      if (!isFinite(lo)) { hi = this.now(); lo = hi - 1e6; }
      const pad = (hi - lo) * 0.02 + 1;
      lo -= pad; hi += pad;
    } else {
      lo = hi - this.windowS * 1e6;
    }
    return { bars, lo, hi };
  }

  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const rowH = 18, top = 16, left = 110;
    const h = Math.max(60, top + this.rows.length * rowH + 4);
    c.style.height = h + 'px';
    const w = c.clientWidth;
    if (c.width !== w * dpr || c.height !== h * dpr) { c.width = w * dpr; c.height = h * dpr; }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '11px system-ui, sans-serif';
    const { bars, lo, hi } = this.view();
    const span = Math.max(1, hi - lo), x = (t) => left + (t - lo) / span * (w - left - 4);
    // Grid and time labels (ms from the window's start).
    g.fillStyle = '#667'; g.strokeStyle = '#e6e9ee';
    for (let i = 0; i <= 5; i++) {
      const t = lo + span * i / 5, px = x(t);
      g.beginPath(); g.moveTo(px, top - 4); g.lineTo(px, h); g.stroke();
      g.fillText(((t - lo) / 1000).toFixed(span < 1e5 ? 1 : 0) + ' ms', px + 2, 11);
    }
    this.rows.forEach((r, i) => {
      g.fillStyle = i % 2 ? '#f3f5f8' : '#fbfcfd';
      g.fillRect(0, top + i * rowH, w, rowH);
      g.fillStyle = '#333';
      g.fillText(r.label, 4, top + i * rowH + 13);
    });
    this.hits = [];
    this.painted = new Set();  // "colour|alpha" of every bar drawn (for tests)
    const now = this.now();
    let drawn = 0;
    for (const b of bars) {
      const end = b.t1 || now;
      if (end < lo || b.t0 > hi) continue;
      const row = this.rowOf.get(b.core);
      if (row === undefined) continue;
      const x0 = Math.max(left, x(b.t0)), x1 = Math.max(x0 + 1, x(end));
      const y = top + row * rowH + 2;
      const st = Timeline.style(b);
      g.fillStyle = st.color;
      g.globalAlpha = st.alpha;
      this.painted.add(st.color + '|' + st.alpha);
      g.fillRect(x0, y, x1 - x0, rowH - 4);
      g.globalAlpha = 1;
      if (x1 - x0 > 40) {
        g.fillStyle = '#fff';
        g.fillText(b.name, x0 + 2, y + 11, x1 - x0 - 4);
      }
      this.hits.push([x0, x1, y, b]);
      drawn++;
    }
    this.drawn = drawn;
  }

  hover(e) {
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    for (const [x0, x1, y, b] of this.hits) {
      if (mx >= x0 && mx <= x1 && my >= y && my <= y + 14) {
        const dur = b.t1 ? ((b.t1 - b.t0) / 1000).toFixed(3) + ' ms' : 'running';
        this.tooltip.textContent = b.name + ' (run ' + b.run + ')\nsub-model ' + b.sub +
          '\nduration ' + dur + (b.failed ? '\nFAILED' : '');
        this.tooltip.style.left = (mx + 12) + 'px';
        this.tooltip.style.top = (my + 8) + 'px';
        this.tooltip.hidden = false;
        return;
      }
    }
    this.tooltip.hidden = true;
  }
}
Timeline.FAILED = '#b23b3b';
Timeline.RUNNING_ALPHA = 0.45;
window.Timeline = Timeline;
