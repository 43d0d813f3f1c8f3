// The dashboard: pool, live timeline, jobs, and a job page. State comes from
// the REST API once (and again after each reconnect) and then from the
// Server-Sent Events of /api/v1/events; the page never polls the whole state.
'use strict';

const state = {
  devices: [],          // /api/v1/pool devices
  jobs: new Map(),      // id -> job summary
  connected: false,
  dropped: 0,           // task records the controller left out of the stream
  records: 0,           // task records received
  view: null,           // job id of the job page, or null
  task: null,           // {id, step} of the task whose log the job page shows, or null
};
const $ = (id) => document.getElementById(id);
const timeline = new Timeline($('timeline'), $('tooltip'), 20000);

// --- the token ---
// A controller with a token answers reads without it 401 (403 for a wrong
// one) unless it runs with --public-read: the page then asks for the token
// once (#read-token-form) and keeps it for this tab in sessionStorage,
// sending it as `Authorization: Bearer` with every read, the event stream
// and cancels. It is never shown, logged, put in the address or in a
// cookie (which other tabs, other ports of this host and cross-site
// requests would carry).
const TOKEN_KEY = 'hmpmd.token';
const savedToken = () => sessionStorage.getItem(TOKEN_KEY);
const authHeaders = () => (savedToken() ? { Authorization: 'Bearer ' + savedToken() } : {});
const keepToken = (t) => sessionStorage.setItem(TOKEN_KEY, t);
const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);
let events = null;  // the event stream (openEvents), once reads are allowed

function askReadToken(status) {
  if (events) { events.close(); events = null; }
  if (status === 403) forgetToken();
  state.connected = false;
  $('conn').textContent = 'needs the token'; $('conn').className = 'conn down';
  $('read-token-message').textContent = status === 403
    ? 'Wrong token: enter it again.' : 'This controller needs its token to show anything: enter it.';
  $('read-token-form').hidden = false;
  $('read-token-input').focus();
}

async function read(path) {
  const r = await fetch(path, { headers: authHeaders() });
  if (r.status === 401 || r.status === 403) {
    askReadToken(r.status);
    throw new Error(path + ': the controller needs its token');
  }
  return r;
}

async function getJson(path) {
  const r = await read(path);
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'style') e.style.cssText = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v); else e[k] = v;
  }
  for (const k of kids) e.append(k);
  return e;
}

// --- pool ---
// A "pool" event comes when a worker joins or dies or its store changes size
// (each worker's heartbeat can say so): read /pool at most once a second.
let poolTimer = null, poolReadAt = 0;
function reloadPool() {
  if (poolTimer != null) return;  // a read is due already
  poolTimer = setTimeout(() => {
    poolTimer = null;
    poolReadAt = Date.now();
    loadPool().catch(console.error);
  }, Math.max(0, poolReadAt + 1000 - Date.now()));
}

// Rows of the devices runs done before a controller restart ran on (the
// task table's "restored" runs): keyed apart from the live pool's core ids.
const pastRows = new Map();
async function loadPool() {
  const p = await getJson('/api/v1/pool');
  state.devices = p.devices;
  const rows = [];
  for (const d of p.devices) {
    for (const c of d.cores) rows.push({ core: c.id, label: d.name + ' ' + c.name });
  }
  timeline.setRows(rows.concat([...pastRows.values()]));
  renderPool();
}

function pastRow(t) {
  const key = 'past:' + t.worker + '/' + t.device + '/' + t.core;
  if (!pastRows.has(key)) {
    pastRows.set(key, { core: key, label: t.worker + ' ' + t.core + ' (before restart)' });
    timeline.setRows(timeline.rows.concat([pastRows.get(key)]));
  }
  return key;
}

// 1536 -> "1.5 KiB", as `hmpmd pool` writes it.
function bytes(n) {
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024, u = 0;
  for (; v >= 1024 && u + 1 < units.length; u++) v /= 1024;
  return v.toFixed(1) + ' ' + units[u];
}

function renderPool() {
  const running = timeline.running();
  const pool = $('pool');
  pool.replaceChildren();
  let alive = 0;
  for (const d of state.devices) {
    if (d.alive) alive++;
    const cores = el('div', { class: 'cores' });
    for (const c of d.cores) {
      const b = d.alive ? running.get(c.id) : null;
      const core = el('span', { class: 'core' + (b ? ' busy' : ''), 'data-core': c.id,
                                title: b ? b.name + ' (' + b.sub + ')' : 'idle' },
                      c.name + (b ? ' ' + b.name : ''));
      if (b) core.style.background = Timeline.color(b.sub || '');
      cores.append(core);
    }
    const why = d.alive ? 'alive, ' + (d.tasks_done || 0) + ' tasks done, ' +
                            bytes(d.store_bytes || 0) + ' stored'
                        : 'dead: ' + (d.left_reason || 'left');
    pool.append(el('div', { class: 'device ' + (d.alive ? 'alive' : 'dead'), 'data-device': d.id },
                   el('div', { class: 'name' }, d.name),
                   el('div', { class: 'state' }, why), cores));
  }
  $('pool-counts').textContent = alive + ' live of ' + state.devices.length + ' devices';
}

// --- jobs ---
// A job only moves forward (queued, running, ended). A REST snapshot asked
// for before an event arrived can answer after it, with an older state:
// it must not undo the event.
const JOB_STATE_RANK = { queued: 0, running: 1, succeeded: 2, failed: 2, cancelled: 2 };
// Returns false when `j` is older than what the page knows.
function upsertJob(j) {
  const old = state.jobs.get(j.id);
  if (old && (JOB_STATE_RANK[j.state] ?? 0) < (JOB_STATE_RANK[old.state] ?? 0)) return false;
  state.jobs.set(j.id, Object.assign(old || {}, j));
  const ended = j.state === 'succeeded' || j.state === 'failed' || j.state === 'cancelled';
  if (ended) timeline.endJob(j.id);
  return true;
}

function shownJob() {
  // The job page's job, else the newest running job, else the newest job.
  if (state.view != null) return state.view;
  let best = null;
  for (const j of state.jobs.values()) {
    if (j.state === 'running' && (best == null || j.id > best.id)) best = j;
  }
  if (best) return best.id;
  let newest = null;
  for (const id of state.jobs.keys()) newest = newest == null || id > newest ? id : newest;
  return newest;
}

function renderJobs() {
  const body = $('jobs').tBodies[0];
  const ids = [...state.jobs.keys()].sort((a, b) => b - a).slice(0, 200);
  body.replaceChildren(...ids.map((id) => {
    const j = state.jobs.get(id);
    const pct = Math.round((j.progress || 0) * 1000) / 10;
    return el('tr', { 'data-job': id, onclick: () => { location.hash = '#/jobs/' + id; } },
              el('td', {}, String(id)), el('td', {}, j.name || ''),
              el('td', { class: 'state state-' + j.state }, j.state),
              el('td', {}, el('div', { class: 'bar', title: pct + '%' },
                              el('div', { style: 'width:' + pct + '%' }))),
              el('td', {}, (j.done || 0) + ' / ' + (j.tasks || 0)),
              el('td', {}, String(j.running || 0) + (j.queued ? ' (+' + j.queued + ' queued)' : '')));
  }));
  let running = 0;
  for (const j of state.jobs.values()) if (j.state === 'running') running++;
  $('summary').textContent = state.jobs.size + ' jobs, ' + running + ' running';
}

// --- job page ---
async function renderJobPage() {
  const id = state.view;
  $('job-section').hidden = id == null;
  if (id == null) return;
  const [job, dag, ready, blocked, metrics] = await Promise.all([
    getJson('/api/v1/jobs/' + id), getJson('/api/v1/jobs/' + id + '/dag'),
    getJson('/api/v1/jobs/' + id + '/tasks?state=ready&limit=50'),
    getJson('/api/v1/jobs/' + id + '/tasks?state=blocked&limit=50'),
    read('/metrics').then((r) => r.text())]);
  const failed = await getJson('/api/v1/jobs/' + id + '/tasks?state=failed&limit=50');
  // A stale answer: render again shortly, from a fresher one.
  if (!upsertJob(job)) jobDirty = true;
  $('job-title').textContent = id + ' ' + job.name + ' (' + job.state + ')';
  // Step metrics: final ones when ended, else the running step's from /metrics.
  const live = (name) => {
    const m = metrics.match(new RegExp(name + '\\{job="' + id + '",step="(\\d+)"\\} (\\S+)'));
    const v = m ? Number(m[2]) : NaN;  // NaN: not computed yet (a large step's first second)
    return Number.isFinite(v) ? v : null;
  };
  const pct = (v) => v == null ? '–' : (v * 100).toFixed(1) + '%';
  const ended = job.makespan_s != null;
  const cards = [
    ['state', job.state], ['progress', pct(job.progress)],
    ['done / tasks', job.done + ' / ' + job.tasks], ['step', job.steps > 1 ? (dag.step + 1) + ' of ' + job.steps : '1'],
    ['masking ratio', pct(ended ? job.masking_ratio : live('hmpmd_step_masking_ratio'))],
    ['bubble ratio', pct(ended ? job.bubble_ratio : live('hmpmd_step_bubble_ratio'))],
    ['utilisation', pct(ended ? job.utilisation : live('hmpmd_step_utilisation'))],
  ];
  if (ended) cards.push(['makespan', (job.makespan_s * 1000).toFixed(2) + ' ms']);
  if (job.error) cards.push(['error', job.error]);
  // Wall-clock times (RFC 3339, UTC), to line the job up with logs.
  for (const k of ['submitted', 'started', 'finished']) {
    if (job[k + '_at']) cards.push([k, job[k + '_at']]);
  }
  if (job.history_missing) cards.push(['history missing', job.history_missing]);
  $('job-summary').replaceChildren(...cards.map(([k, v]) => el('div', { class: 'card' }, k, el('b', {}, String(v)))));
  renderDag(dag);
  const rows = [...failed.tasks, ...ready.tasks, ...blocked.tasks];
  $('job-waiting-count').textContent = failed.total + ' failed, ' + ready.total + ' ready, ' +
    blocked.total + ' blocked' +
    (rows.length < failed.total + ready.total + blocked.total ? ' (first ' + rows.length + ' shown)' : '');
  // A click shows the task's log lines and errors below.
  $('job-waiting').tBodies[0].replaceChildren(...rows.map((t) => el('tr', {
    'data-task': t.id, onclick: () => { location.hash = taskHash(id, t.id, t.step); } },
    el('td', {}, t.id), el('td', {}, String(t.step)), el('td', {}, t.submodel),
    el('td', {}, t.state + (t.max_retries ? ' (' + t.retries + '/' + t.max_retries + ' retries)' : '')),
    el('td', {}, t.waiting ? t.waiting.reason : ''))));
}

// --- cancel (DELETE /api/v1/jobs/{id}) ---
// A controller with a token answers a cancel without it 401 and one with a
// wrong token 403 (with --public-read, reads did not need it): the token is
// then asked for in the job's form and kept as above.
let cancelling = null;  // job id of the cancel in flight, or of the one waiting for a token

function jobActive(id) {
  const j = state.jobs.get(id);
  return !!j && (j.state === 'queued' || j.state === 'running');
}

// The Cancel button follows the job page's job: shown while it is queued or
// running, gone once it ended.
function renderCancel() {
  const b = $('job-cancel');
  const show = state.view != null && jobActive(state.view);
  if (b.hidden === show) b.hidden = !show;
  const busy = cancelling != null && cancelling === state.view && $('token-form').hidden;
  if (b.disabled !== busy) b.disabled = busy;
  if (!show && !$('token-form').hidden && cancelling === state.view) {  // it ended meanwhile
    $('token-form').hidden = true;
    cancelling = null;
    say('job ' + state.view + ' has ended', false);
  }
}

function say(text, error) {
  const m = $('job-message');
  m.textContent = text;
  m.className = error ? 'error' : '';
  m.hidden = !text;
}

function askToken(id, text) {
  cancelling = id;
  say(text, true);
  $('token-input').value = '';
  $('token-form').hidden = false;
  $('token-input').focus();
}

async function cancelJob(id) {
  cancelling = id;
  $('token-form').hidden = true;
  renderCancel();
  let r, body = {};
  try {
    r = await fetch('/api/v1/jobs/' + id, { method: 'DELETE', headers: authHeaders() });
    body = await r.json().catch(() => ({}));
  } catch (e) {
    cancelling = null;
    say('job ' + id + ' not cancelled: the controller cannot be reached', true);
    return;
  }
  if (r.status === 401 || r.status === 403) {
    forgetToken();
    askToken(id, r.status === 401 ? 'This controller needs its token to cancel a job: enter it.'
                                  : 'Wrong token: job ' + id + ' was not cancelled. Enter the token again.');
    return;
  }
  cancelling = null;
  if (r.ok) {
    upsertJob(body);
    renderJobs();
    jobDirty = true;
    say('job ' + id + ' cancelled', false);
  } else if (r.status === 409) {
    say('job ' + id + ' has already ended: nothing to cancel', true);
    jobDirty = true;
  } else {
    say('job ' + id + ' not cancelled: HTTP ' + r.status + (body.error ? ': ' + body.error : ''), true);
  }
  renderCancel();
}

// --- a task's log lines and errors (GET /api/v1/jobs/{id}/logs) ---
function taskHash(job, task, step) {
  return '#/jobs/' + job + '/tasks/' + encodeURIComponent(task) + '/' + (step || 0);
}

async function renderTaskLog() {
  const out = $('task-log');
  const t = state.task;
  $('task-section').hidden = state.view == null;
  if (state.view == null) return;
  if (t == null) { out.replaceChildren(el('p', {}, 'Pick a task above, or name one.')); return; }
  $('task-id').value = t.id;
  $('task-step').value = String(t.step);
  const path = '/api/v1/jobs/' + state.view + '/logs?task=' + encodeURIComponent(t.id) + '&step=' + t.step;
  const r = await read(path);
  const log = await r.json();
  if (!r.ok) { out.replaceChildren(el('p', { class: 'error' }, log.error || ('HTTP ' + r.status))); return; }
  const kids = [el('p', {}, log.task + ' (step ' + log.step + '): ' + log.state + ', attempt ' + log.attempt +
    (log.max_retries > 0 ? ', ' + log.retries + ' of ' + log.max_retries + ' retries used' : ''))];
  for (const a of log.attempts) {
    kids.push(el('h4', {}, 'attempt ' + a.attempt + (a.ok ? ': done' : ': failed')));
    if (!a.ok) kids.push(el('p', { class: 'error' }, a.error));
    kids.push(el('pre', { class: 'log' }, a.lines.length ? a.lines.join('\n') : '(no log lines)'));
  }
  if (log.dropped) kids.push(el('p', {}, log.dropped + ' more line(s) dropped'));
  if (!log.attempts.length) kids.push(el('p', {}, 'Nothing logged yet.'));
  out.replaceChildren(...kids);
}

function renderDag(dag) {
  // Columns by the controller's depth of each sub-model (task edges are
  // acyclic; sub-model edges may loop, e.g. forward and backward passes).
  const depths = [...new Set(dag.submodels.map((s) => s.depth))].sort((x, y) => x - y);
  const layer = new Map(dag.submodels.map((s) => [s.name, depths.indexOf(s.depth)]));
  const names = dag.submodels.map((s) => s.name);
  const cols = new Map();
  for (const n of names) {
    const l = layer.get(n);
    if (!cols.has(l)) cols.set(l, []);
    cols.get(l).push(n);
  }
  const W = 170, H = 54, gx = 60, gy = 16, pos = new Map();
  let maxRows = 1;
  for (const [l, list] of cols) {
    maxRows = Math.max(maxRows, list.length);
    list.forEach((n, i) => pos.set(n, [10 + l * (W + gx), 10 + i * (H + gy)]));
  }
  const width = 20 + cols.size * (W + gx), height = 20 + maxRows * (H + gy);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
  svg.setAttribute('preserveAspectRatio', 'xMinYMin meet');
  svg.style.maxHeight = height + 'px';
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    svg.append(e);
    return e;
  };
  for (const e of dag.edges) {
    const [x0, y0] = pos.get(e.from), [x1, y1] = pos.get(e.to);
    add('path', { d: `M${x0 + W},${y0 + H / 2} C${x0 + W + gx / 2},${y0 + H / 2} ${x1 - gx / 2},${y1 + H / 2} ${x1},${y1 + H / 2}`,
                  stroke: '#8a94a6', fill: 'none', 'stroke-width': Math.min(6, 1 + Math.log2(e.count)) });
  }
  for (const s of dag.submodels) {
    const [x, y] = pos.get(s.name);
    add('rect', { x, y, width: W, height: H, rx: 5, fill: Timeline.color(s.name), 'data-submodel': s.name });
    add('text', { x: x + 6, y: y + 16, fill: '#fff', 'font-weight': 600 }, s.name + ' (' + s.kind + ')');
    add('text', { x: x + 6, y: y + 32, fill: '#fff', 'font-size': 11 }, s.tasks + ' tasks');
    add('text', { x: x + 6, y: y + 46, fill: '#fff', 'font-size': 11 },
        s.done + ' / ' + s.running + ' / ' + (s.queued || 0) + ' / ' + s.ready + ' / ' + s.blocked);
  }
  $('job-dag').replaceChildren(svg);
}

// --- live events ---
// The Server-Sent Events of `path`, read with fetch so that they carry the
// token (an EventSource cannot send a header). `handlers[event]` gets each
// event's {data}; after the stream ends or fails, `onDown` is called and it
// opens again a second later, as an EventSource would. A 401 or 403 stops
// it and asks for the token. close() ends it for good.
function openEvents(path, handlers, onDown) {
  const abort = new AbortController();
  let closed = false;
  const dispatch = (block) => {
    let type = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) type = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    }
    if (data.length && handlers[type]) handlers[type]({ data: data.join('\n') });
  };
  (async () => {
    while (!closed) {
      try {
        const r = await fetch(path, { headers: authHeaders(), signal: abort.signal });
        if (r.status === 401 || r.status === 403) {
          closed = true;
          const why = await r.json().catch(() => ({}));
          // A tenant's token reads its own jobs, not the stream of all.
          if (r.status === 403 && handlers.tenant && /^the event stream/.test(why.error || '')) {
            handlers.tenant();
          } else {
            askReadToken(r.status);
          }
          return;
        }
        if (r.ok) {
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            for (let end; (end = buf.indexOf('\n\n')) >= 0; buf = buf.slice(end + 2)) {
              dispatch(buf.slice(0, end));
            }
          }
        }
      } catch (e) {
        if (closed) return;
      }
      onDown();
      await new Promise((done) => setTimeout(done, 1000));
    }
  })();
  return { close() { closed = true; abort.abort(); } };
}

// A tenant's page (the event stream shows every tenant's jobs, so it
// takes an admin's token): its own jobs and the pool, read every 2 s, with
// no task timeline. Stops when the token is refused.
let polls = 0;  // the running poll loop's number: a newer one ends it
async function pollOwnJobs() {
  $('conn').textContent = 'own jobs, every 2 s'; $('conn').className = 'conn up';
  const mine = ++polls;
  for (state.connected = true; state.connected && mine === polls;) {
    await reloadAll();
    await new Promise((done) => setTimeout(done, 2000));
  }
}

// The pool and the jobs read afresh, and the page drawn from them.
async function reloadAll() {
  try {
    await loadPool();
    for (const j of (await getJson('/api/v1/jobs')).jobs) upsertJob(j);
    renderJobs();
    if (state.view != null) renderJobPage();
  } catch (err) { console.error(err); }
}

function connect() {
  events = openEvents('/api/v1/events', {
    hello: async (e) => {
      state.connected = true;
      timeline.setClock(JSON.parse(e.data).now_us);
      $('conn').textContent = 'live'; $('conn').className = 'conn up';
      // A fresh snapshot after every (re)connect; events keep it current.
      await reloadAll();
    },
    tasks: (e) => {
      const d = JSON.parse(e.data);
      timeline.setClock(d.now_us);
      for (const r of d.tasks) timeline.add(r);
      state.records += d.tasks.length;
      state.dropped += d.dropped;
      $('timeline-dropped').textContent = state.dropped ? state.dropped + ' task events not shown (too fast)' : '';
      poolDirty = true;
    },
    jobs: (e) => {
      const d = JSON.parse(e.data);
      timeline.setClock(d.now_us);
      for (const j of d.jobs) upsertJob(j);
      renderJobs();
      // Ended jobs change the pool's per-worker counts.
      if (d.jobs.some((j) => j.state !== 'running' && j.state !== 'queued')) reloadPool();
      if (state.view != null && d.jobs.some((j) => j.id === state.view)) jobDirty = true;
    },
    pool: reloadPool,
    tenant: pollOwnJobs,
  }, () => {
    state.connected = false;
    $('conn').textContent = 'reconnecting'; $('conn').className = 'conn down';
  });
}

// A job shown for the first time gets its most recent finished runs, and
// those out now, from the task table (the page may have opened after they
// started); live records and these meet without duplicates (Timeline.add
// keys bars by job and run).
const backfilled = new Set();
async function backfill(job) {
  if (backfilled.has(job)) return;
  backfilled.add(job);
  const first = await getJson('/api/v1/jobs/' + job + '/tasks?state=done&limit=1');
  const offset = Math.max(0, first.total - 5000);
  const page = await getJson('/api/v1/jobs/' + job + '/tasks?state=done&limit=5000&offset=' + offset);
  const cores = new Map();
  for (const d of state.devices) for (const c of d.cores) cores.set(d.id + '/' + c.name, c.id);
  let missing = 0;
  for (const t of page.tasks) {
    if (t.history_missing) { ++missing; continue; }
    const core = t.restored ? pastRow(t) : cores.get(t.device + '/' + t.core);
    if (core === undefined || timeline.byKey.has(job + ':' + t.run)) continue;
    timeline.add([job, t.run, 1, core, t.device, page.origin_us + t.start_us,
                  page.origin_us + t.end_us, t.id, t.submodel]);
  }
  state.records += page.tasks.length;
  // Runs out now are drawn open from their dispatch, as live records would.
  for (const which of ['running', 'queued']) {
    const out = await getJson('/api/v1/jobs/' + job + '/tasks?state=' + which + '&limit=5000');
    for (const t of out.tasks) {
      const core = cores.get(t.device + '/' + t.core);
      if (core === undefined || t.dispatched_us === undefined) continue;
      timeline.add([job, t.run, 0, core, t.device, out.origin_us + t.dispatched_us, 0, t.id, t.submodel]);
    }
  }
  const note = $('timeline-history');
  note.hidden = missing === 0;
  note.textContent = missing === 0 ? '' : missing + ' runs done before a controller restart ' +
      'are not drawn: the job store (written by an older version) did not keep where they ran';
}

// The timeline's legend, from Timeline.legend() (the table draw() paints
// from); rebuilt only when it changes.
let legendText = '';
function renderLegend() {
  const entries = timeline.legend();
  const text = JSON.stringify(entries);
  if (text === legendText) return;
  legendText = text;
  $('timeline-legend').replaceChildren(el('small', {}, 'solid: done, faded: running'),
                                       ...entries.map((e) => el('span', { class: 'legend-entry' },
    ...e.swatches.map((s) => el('span', { class: 'swatch', title: s.title, 'data-color': s.color,
                                          'data-alpha': String(s.alpha),
                                          style: 'background:' + s.color + ';opacity:' + s.alpha })),
    e.label)));
}

let poolDirty = false, jobDirty = false, lastJobRender = 0;
function frame(t) {
  const job = shownJob();
  timeline.job = job;
  if (job != null && state.connected && state.devices.length && !backfilled.has(job)) {
    backfill(job).catch(console.error);
  }
  const j = job != null ? state.jobs.get(job) : null;
  timeline.ended = !!j && j.state !== 'running' && j.state !== 'queued';
  $('timeline-job').textContent = j ? 'job ' + job + ' ' + (j.name || '') + ' (' + j.state + ')' : '';
  timeline.draw();
  renderLegend();
  renderCancel();
  if (poolDirty) { poolDirty = false; renderPool(); }
  // The job page re-reads at most twice a second.
  if (jobDirty && t - lastJobRender > 500) { jobDirty = false; lastJobRender = t; renderJobPage().catch(console.error); }
  requestAnimationFrame(frame);
}

function route() {
  const m = location.hash.match(/^#\/jobs\/(\d+)(?:\/tasks\/([^/]+)\/(\d+))?/);
  const view = m ? Number(m[1]) : null;
  if (view !== state.view) { say('', false); $('token-form').hidden = true; cancelling = null; }
  state.view = view;
  state.task = m && m[2] ? { id: decodeURIComponent(m[2]), step: Number(m[3]) } : null;
  renderJobPage().catch((e) => { $('job-title').textContent = String(e); });
  renderTaskLog().catch((e) => { $('task-log').textContent = String(e); });
}

// For tests and scripts: what the page shows now.
window.hmpmdDashboard = {
  snapshot() {
    const jobs = {};
    for (const [id, j] of state.jobs) jobs[id] = j.state;
    return {
      connected: state.connected,
      devices: document.querySelectorAll('#pool .device').length,
      aliveDevices: document.querySelectorAll('#pool .device.alive').length,
      timelineJob: timeline.job,
      timelineBars: timeline.job == null ? 0 : timeline.barsOf(timeline.job).filter((b) => b.t1).length,
      timelineDrawn: timeline.drawn || 0,
      timelinePainted: [...timeline.painted],
      taskRecords: state.records,
      jobs,
    };
  },
};

$('timeline-window').addEventListener('change', (e) => { timeline.windowS = Number(e.target.value); });
$('task-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (state.view == null) return;
  const hash = taskHash(state.view, $('task-id').value, Number($('task-step').value) || 0);
  if (location.hash === hash) renderTaskLog().catch(console.error); else location.hash = hash;
});
$('job-cancel').addEventListener('click', () => {
  if (state.view != null) cancelJob(state.view).catch(console.error);
});
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token-input').value.trim();
  $('token-input').value = '';
  if (!t || cancelling == null) return;
  keepToken(t);
  cancelJob(cancelling).catch(console.error);
});
$('read-token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('read-token-input').value.trim();
  $('read-token-input').value = '';
  if (!t) return;
  keepToken(t);
  $('read-token-form').hidden = true;
  start().catch(console.error);
});

// Reads first: a controller that wants the token says so (401) before the
// event stream is opened.
async function start() {
  await read('/api/v1/pool');
  if (!events) connect();
  route();
}
$('token-dismiss').addEventListener('click', () => {
  $('token-form').hidden = true;
  cancelling = null;
  say('', false);
});
window.addEventListener('hashchange', route);
start().catch(console.error);
requestAnimationFrame(frame);
