// The magrpo dashboard page: polls each run's metrics.jsonl, samples.jsonl and eval.json and draws
// uPlot charts (one series per metric and run; runs differ by dash pattern). Every chart card
// carries data-points (distinct env steps drawn) and data-series for tests and scripts.
'use strict';

const POLL_MS = 2000;
const SLOW_POLL_EVERY = 5; // samples.jsonl and eval.json: every 5th poll
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];
const DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3]];
const BASELINE_DASH = [4, 4];
const BASELINE_COLORS = ['#6b6b70', '#a16207', '#0f766e', '#7c3aed', '#be123c'];

const CHARTS = [
  { id: 'reward', section: 'train', title: 'Reward and expected return per turn', match: /^turn_\d+\/(reward_mean|expected_return)$/ },
  { id: 'components', section: 'train', title: 'Reward components', match: /^turn_\d+\/reward\// },
  { id: 'timing', section: 'train', title: 'Seconds per item: sampling, reward, update', match: /^time\// },
  { id: 'kl', section: 'train', title: 'Reference KL', match: /^turn_\d+\/reference_kl/, optional: true },
  { id: 'loss', section: 'agents', title: 'Loss', match: /^agent_\d+\/loss$/ },
  { id: 'grad_norm', section: 'agents', title: 'Gradient norm', match: /^agent_\d+\/grad_norm$/ },
  { id: 'entropy', section: 'agents', title: 'Entropy (nats per token)', match: /^agent_\d+\/entropy$/ },
  { id: 'completion_length', section: 'agents', title: 'Completion length (tokens)', match: /^agent_\d+\/completion_length$/ },
  { id: 'lr', section: 'agents', title: 'Learning rate', match: /^agent_\d+\/lr$/, optional: true },
  // Fluency next to the reward: a rising reward with falling word validity or rising ref NLL is hacking.
  { id: 'fluency', section: 'agents', title: 'Fluency: word validity, distinct-2, repetition (0–1)', match: /^agent_\d+\/(word_validity|distinct_2|repetition)$/, optional: true },
  { id: 'ref_nll', section: 'agents', title: 'Fluency: NLL under the starting model (nats per token)', match: /^agent_\d+\/ref_nll$/, optional: true },
  { id: 'eval', section: 'eval', title: 'Eval reward and expected return', match: /^eval\/turn_\d+\/(reward_mean|expected_return)$/, baselines: true },
  { id: 'eval-other', section: 'eval', title: 'Other eval metrics', match: /^eval\/(?!turn_\d+\/(reward_mean|expected_return)$)/, optional: true },
];
const LATEST_KEYS = [/^turn_1\/reward_mean$/, /^turn_1\/expected_return$/, /^eval\/turn_1\/reward_mean$/, /^agent_\d+\/loss$/, /^agent_\d+\/entropy$/];

const state = { runs: [], data: new Map(), charts: new Map(), polls: 0, selected: null };

const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};
const fmt = (x) => (typeof x !== 'number' ? String(x) : Math.abs(x) >= 100 || Number.isInteger(x) ? String(Math.round(x * 100) / 100) : x.toPrecision(3));
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN);

async function fetchText(url) {
  const r = await fetch(url, { cache: 'no-store' });
  return r.ok ? r.text() : null;
}

function parseJsonl(text) {
  const out = [];
  for (const line of (text ?? '').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a line still being written
    }
  }
  return out;
}

async function poll() {
  const slow = state.polls % SLOW_POLL_EVERY === 0;
  state.polls++;
  let changed = false;
  for (const run of state.runs) {
    const d = state.data.get(run.id);
    const metrics = await fetchText(`/runs/${run.id}/metrics.jsonl`);
    if (metrics !== null && metrics.length !== d.metricsLength) {
      d.metricsLength = metrics.length;
      d.rows = parseJsonl(metrics);
      changed = true;
    }
    if (slow) {
      const samples = await fetchText(`/runs/${run.id}/samples.jsonl`);
      if (samples !== null && samples.length !== d.samplesLength) {
        d.samplesLength = samples.length;
        d.samples = parseJsonl(samples);
        renderTreeList();
      }
      const ev = await fetchText(`/runs/${run.id}/eval.json`);
      if (ev !== null && ev !== d.evalText) {
        d.evalText = ev;
        d.eval = JSON.parse(ev);
        changed = true;
      }
    }
  }
  if (changed) render();
  document.getElementById('status').textContent = `updated ${new Date().toLocaleTimeString()} · polling every ${POLL_MS / 1000} s`;
}

/** Series of one chart over all runs: metric series, then baseline reference lines. */
function chartSeries(def) {
  const series = [];
  const keysInOrder = [];
  for (const run of state.runs) {
    const d = state.data.get(run.id);
    const keys = [...new Set(d.rows.flatMap((r) => Object.keys(r)))].filter((k) => def.match.test(k)).sort();
    for (const k of keys) {
      if (!keysInOrder.includes(k)) keysInOrder.push(k);
      const points = new Map();
      for (const r of d.rows) if (typeof r[k] === 'number') points.set(r.step, r[k]);
      series.push({ label: state.runs.length > 1 ? `${run.name} · ${k}` : k, run: run.id, key: k, points });
    }
    if (def.baselines && d.eval && keys.length) {
      for (const row of d.eval.rows.filter((x) => x.method !== 'magrpo'))
        series.push({ label: `${state.runs.length > 1 ? `${run.name} · ` : ''}baseline ${row.method}`, run: run.id, constant: row.reward_mean, method: row.method });
    }
  }
  return { series, keysInOrder };
}

function chartCard(def) {
  let c = state.charts.get(def.id);
  if (!c) {
    const card = el('div', { class: 'card', 'data-chart': def.id, 'data-points': '0', 'data-series': '0' }, el('h3', { text: def.title }));
    document.getElementById(`charts-${def.section}`).append(card);
    c = { card, plot: null, signature: '' };
    state.charts.set(def.id, c);
  }
  return c;
}

function renderChart(def) {
  const { series, keysInOrder } = chartSeries(def);
  const c = chartCard(def);
  const xs = [...new Set(series.filter((s) => s.points).flatMap((s) => [...s.points.keys()]))].sort((a, b) => a - b);
  c.card.hidden = Boolean(def.optional) && xs.length === 0;
  c.card.dataset.points = String(xs.length);
  c.card.dataset.series = String(series.length);
  c.card.dataset.baselines = String(series.filter((s) => s.constant !== undefined).length);
  if (xs.length === 0) {
    c.plot?.destroy();
    c.plot = null;
    if (!c.card.querySelector('.empty')) c.card.append(el('p', { class: 'empty', text: 'no data yet' }));
    return;
  }
  c.card.querySelector('.empty')?.remove();
  const data = [xs, ...series.map((s) => (s.constant !== undefined ? xs.map(() => s.constant) : xs.map((x) => s.points.get(x) ?? null)))];
  const signature = series.map((s) => s.label).join('|');
  if (c.plot && c.signature === signature) {
    c.plot.setData(data);
    return;
  }
  c.plot?.destroy();
  c.signature = signature;
  const runIndex = (id) => state.runs.findIndex((r) => r.id === id);
  const baselineNames = [...new Set(series.filter((s) => s.method).map((s) => s.method))];
  const opts = {
    width: Math.max(300, c.card.clientWidth - 14),
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: 'env step', size: 36 }, { size: 56 }],
    legend: { live: true },
    series: [
      { label: 'env step' },
      ...series.map((s) => {
        const color = s.constant !== undefined ? BASELINE_COLORS[baselineNames.indexOf(s.method) % BASELINE_COLORS.length] : PALETTE[keysInOrder.indexOf(s.key) % PALETTE.length];
        return {
          label: s.label,
          stroke: color,
          width: s.constant !== undefined ? 1 : 1.5,
          dash: s.constant !== undefined ? BASELINE_DASH : DASHES[runIndex(s.run) % DASHES.length],
          spanGaps: true,
          points: { show: xs.length <= 40, size: 4 },
          value: (_u, v) => (v === null || v === undefined ? '–' : fmt(v)),
        };
      }),
    ],
  };
  c.plot = new uPlot(opts, data, c.card);
}

function renderLatest() {
  const rows = state.runs.map((run) => {
    const d = state.data.get(run.id);
    const last = {};
    for (const r of d.rows) Object.assign(last, r);
    return { run, last };
  });
  const keys = [...new Set(rows.flatMap(({ last }) => Object.keys(last).filter((k) => LATEST_KEYS.some((re) => re.test(k)))))].sort();
  const table = el(
    'table',
    { id: 'latest-table' },
    el('tr', {}, ...['run', 'step', ...keys].map((k) => el('th', { text: k }))),
    ...rows.map(({ run, last }) => el('tr', {}, el('td', { text: run.name }), el('td', { text: fmt(last.step ?? '–') }), ...keys.map((k) => el('td', { text: k in last ? fmt(last[k]) : '–' })))),
  );
  document.getElementById('latest').replaceChildren(table);
}

function renderEvalTable() {
  const parts = [];
  for (const run of state.runs) {
    const ev = state.data.get(run.id).eval;
    if (!ev) continue;
    const cols = [...new Set(ev.rows.flatMap((r) => Object.keys(r.metrics)))];
    parts.push(
      el('h3', { text: `${run.name}: final evaluation, ${ev.items} items × ${ev.samples_per_item}` }),
      el(
        'table',
        { class: 'eval-table' },
        el('tr', {}, ...['method', ...cols].map((c) => el('th', { text: c }))),
        ...ev.rows.map((r) => el('tr', {}, el('td', { text: r.method, title: r.description }), ...cols.map((c) => el('td', { text: c in r.metrics ? fmt(r.metrics[c]) : '–' })))),
      ),
    );
  }
  document.getElementById('eval-table').replaceChildren(...parts);
}

function renderTreeList() {
  const items = state.runs.flatMap((run) => (state.data.get(run.id).samples ?? []).map((s, i) => ({ run, s, i })));
  const list = document.getElementById('tree-list');
  list.replaceChildren(
    ...items.map(({ run, s, i }) => {
      const label = `${state.runs.length > 1 ? `${run.name} · ` : ''}item ${s.item} · step ${s.env_step} · reward ${fmt(mean(s.tree.rewards))}`;
      const id = `${run.id}:${i}`;
      const button = el('button', { type: 'button', 'data-tree': id, 'aria-pressed': String(state.selected === id), onclick: () => selectTree(id), text: label });
      return el('li', {}, button);
    }),
  );
}

async function selectTree(id) {
  state.selected = id;
  const [runId, i] = id.split(':').map(Number);
  const record = state.data.get(runId).samples[i];
  for (const b of document.querySelectorAll('#tree-list button')) b.setAttribute('aria-pressed', String(b.dataset.tree === id));
  // Token boundaries on demand: the recorded ids, each shown as its own piece of text.
  const toggle = el('label', { class: 'token-toggle' }, el('input', { type: 'checkbox', id: 'show-tokens', onchange: (e) => setShowTokens(e.target.checked) }), ' show token boundaries');
  toggle.firstChild.checked = state.showTokens;
  pieces = state.showTokens && record.tree.completion_ids ? await tokenPieces(runId) : null;
  document.getElementById('tree-view').replaceChildren(toggle, renderNode(record.tree, 0, `item ${record.item}:`));
}

let pieces = null;
async function tokenPieces(runId) {
  state.pieces ??= new Map();
  if (!state.pieces.has(runId)) {
    const text = await fetchText(`/runs/${runId}/tokens.json`);
    state.pieces.set(runId, text === null ? null : JSON.parse(text));
  }
  return state.pieces.get(runId);
}

function setShowTokens(on) {
  state.showTokens = on;
  if (state.selected) selectTree(state.selected);
}

/** A completion as text, or (token view) one span per sampled token, alternately shaded. */
function completionView(text, ids) {
  if (!pieces || !ids) return el('pre', { class: 'completion', text: text === '' ? '∅ (empty)' : text });
  return el('pre', { class: 'completion tokens', title: `${ids.length} tokens` }, ...ids.map((t) => el('span', { class: 'tok', title: `id ${t}`, text: pieces[t] ?? `<${t}>` })));
}

function renderNode(node, depth, label) {
  const agents = node.prompts.map((prompt, a) =>
    el(
      'div',
      { class: 'agent' },
      el('h4', { text: `agent ${a} — prompt` }),
      el('pre', { class: 'prompt', text: prompt }),
      el('h4', { text: `agent ${a} — ${node.completions[a].length} completions` }),
      el('ol', { start: '0' }, ...node.completions[a].map((c, g) => el('li', {}, completionView(c, node.completion_ids?.[a]?.[g])))),
    ),
  );
  const compNames = [...new Set(node.components.flatMap((c) => Object.keys(c)))];
  const table = el(
    'table',
    { class: 'joint' },
    el('tr', {}, ...['joint action', 'completions (per agent)', 'reward', 'return', ...compNames].map((h) => el('th', { text: h }))),
    ...node.joint.map((idx, j) =>
      el(
        'tr',
        {},
        el('td', { text: String(j) }),
        el('td', { text: idx.map((g, a) => `a${a}#${g}`).join(' ') }),
        el('td', { text: fmt(node.rewards[j]) }),
        el('td', { text: node.returns[j] === undefined ? '–' : fmt(node.returns[j]) }),
        ...compNames.map((n) => el('td', { text: fmt(node.components[j]?.[n] ?? 0) })),
      ),
    ),
  );
  const children = node.children.map((child, j) => (child ? renderNode(child, depth + 1, `joint action ${j} →`) : null)).filter(Boolean);
  const summary = `${label} turn ${node.turn + 1} · env step ${node.env_step} · mean reward ${fmt(mean(node.rewards))} · mean return ${fmt(mean(node.returns))}`;
  const details = el(
    'details',
    { class: 'node', 'data-node': `${node.turn}-${node.env_step}` },
    el('summary', { text: summary }),
    el('div', { class: 'agents' }, ...agents),
    table,
    children.length ? el('div', { class: 'children' }, ...children) : null,
  );
  if (depth === 0) details.open = true;
  return details;
}

function render() {
  renderLatest();
  for (const def of CHARTS) renderChart(def);
  renderEvalTable();
  window.__dashboard = {
    charts: Object.fromEntries([...state.charts].map(([id, c]) => [id, { points: Number(c.card.dataset.points), series: Number(c.card.dataset.series) }])),
  };
}

async function main() {
  state.runs = await (await fetch('/api/runs', { cache: 'no-store' })).json();
  document.getElementById('runs').replaceChildren(
    ...state.runs.map((r, i) => {
      const dash = el('span', { class: 'dash' });
      dash.style.borderTopStyle = i === 0 ? 'solid' : i === 2 ? 'dotted' : 'dashed';
      return el('span', { class: 'run-chip', title: r.name }, dash, r.name);
    }),
  );
  for (const r of state.runs) state.data.set(r.id, { rows: [], samples: [], eval: null, metricsLength: -1, samplesLength: -1, evalText: null });
  await poll();
  render();
  document.body.dataset.ready = 'true';
  setInterval(() => poll().catch((e) => (document.getElementById('status').textContent = `poll failed: ${e}`)), POLL_MS);
  window.addEventListener('resize', () => {
    for (const c of state.charts.values()) c.plot?.setSize({ width: Math.max(300, c.card.clientWidth - 14), height: 220 });
  });
}

main().catch((e) => {
  document.getElementById('status').textContent = `failed to load: ${e}`;
});
