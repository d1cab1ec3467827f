// The magrpo dashboard page: polls each run's metrics.jsonl, samples.jsonl, eval.json and demo.json
// and draws uPlot charts. One colour per run when several runs overlay (per metric otherwise), a
// legend under each chart, axis titles, tick labels that stay readable for tiny values (5e-6), a
// debiased EMA smoothing slider (the raw line stays faint behind) and a log-scale toggle, as in
// TensorBoard. Every chart card carries data-points (distinct env steps drawn), data-series,
// data-baselines, data-evalrows, data-xlabel/data-ylabel and data-yticks for tests and scripts.
'use strict';

const POLL_MS = 2000;
const SLOW_POLL_EVERY = 5; // samples.jsonl, eval.json and demo.json: every 5th poll
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];
const DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3]];
const BASELINE_DASH = [4, 4];
const BASELINE_COLORS = ['#6b6b70', '#a16207', '#0f766e', '#7c3aed', '#be123c'];
/** Colours of the evaluated teams in a single run (several runs: the run's colour). */
const TEAM_COLORS = { trained: '#111827', untrained: '#9ca3af' };
/** Rollout trees listed per page. */
const PAGE_SIZE = 20;
const X_LABEL = 'env step';

const CHARTS = [
  { id: 'reward', section: 'train', title: 'Reward and expected return per turn', y: 'reward', match: /^turn_\d+\/(reward_mean|expected_return)$/ },
  { id: 'components', section: 'train', title: 'Reward components', y: 'reward component', match: /^turn_\d+\/reward\// },
  { id: 'timing', section: 'train', title: 'Seconds per item: sampling, reward, update', y: 'seconds per item', match: /^time\// },
  { id: 'kl', section: 'train', title: 'Reference KL', y: 'KL (nats per token)', match: /^turn_\d+\/reference_kl/, optional: true },
  { id: 'loss', section: 'agents', title: 'Loss', y: 'loss', match: /^agent_\d+\/loss$/ },
  { id: 'grad_norm', section: 'agents', title: 'Gradient norm', y: 'L2 norm', match: /^agent_\d+\/grad_norm$/ },
  { id: 'entropy', section: 'agents', title: 'Entropy (nats per token)', y: 'nats per token', match: /^agent_\d+\/entropy$/ },
  { id: 'completion_length', section: 'agents', title: 'Completion length (tokens)', y: 'tokens', match: /^agent_\d+\/completion_length$/ },
  { id: 'lr', section: 'agents', title: 'Learning rate', y: 'learning rate', match: /^agent_\d+\/lr$/, optional: true },
  // Fluency next to the reward: a rising reward with falling word validity or rising ref NLL is hacking.
  { id: 'fluency', section: 'agents', title: 'Fluency: word validity, distinct-2, repetition (0–1)', y: 'fraction (0–1)', match: /^agent_\d+\/(word_validity|distinct_2|repetition)$/, optional: true },
  { id: 'grammar_validity', section: 'agents', title: 'Fluency: grammar validity (share of function-word trigrams found in English)', y: 'share', match: /^agent_\d+\/grammar_validity$/, optional: true },
  { id: 'clause_length', section: 'agents', title: 'Fluency: words per clause (lists of fragments score 2–3)', y: 'words', match: /^agent_\d+\/clause_length$/, optional: true },
  { id: 'ref_nll', section: 'agents', title: 'Fluency: NLL under the starting model (nats per token)', y: 'nats per token', match: /^agent_\d+\/ref_nll$/, optional: true },
  { id: 'eval', section: 'eval', title: 'Eval reward and expected return', y: 'reward', match: /^eval\/turn_\d+\/(reward_mean|expected_return)$/, evalRows: true },
  { id: 'eval-other', section: 'eval', title: 'Other eval metrics', y: 'value', match: /^eval\/(?!turn_\d+\/(reward_mean|expected_return)$)/, optional: true },
];
const LATEST_KEYS = [/^turn_1\/reward_mean$/, /^turn_1\/expected_return$/, /^eval\/turn_1\/reward_mean$/, /^agent_\d+\/loss$/, /^agent_\d+\/entropy$/];

const state = {
  runs: [],
  data: new Map(),
  charts: new Map(),
  polls: 0,
  selected: null,
  smoothing: 0.6,
  log: false,
  filter: { item: '', agent: '', min: '', max: '', text: '', page: 0 },
};

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
/** A number for tables and legends: exponent form for tiny or huge values, else 3 significant digits. */
const fmt = (x) => {
  if (typeof x !== 'number') return String(x);
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return shortExp(x, 3);
  return a >= 100 || Number.isInteger(x) ? String(Math.round(x * 100) / 100) : x.toPrecision(3);
};
/** `x` as e.g. 5e-6 or 2.5e-5: at most `digits` significant digits, trailing zeros dropped. */
const shortExp = (x, digits) => x.toExponential(Math.max(0, digits - 1)).replace(/\.?0+e/, 'e').replace('e+', 'e');
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN);

/**
 * Axis tick labels that tell neighbouring ticks apart at any magnitude: exponent form when the
 * largest tick is below 1e-3 or at least 1e5 (a learning rate of 5e-6 reads "5e-6", not "0"),
 * otherwise as many decimals as the tick spacing needs. On a log scale each tick is formatted alone.
 */
function tickLabels(splits, log) {
  const vals = splits.filter((v) => v !== null && Number.isFinite(v));
  if (vals.length === 0) return splits.map(() => '');
  if (log) return splits.map((v) => (v === null ? '' : Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5 ? shortExp(v, 2) : String(Number(v.toPrecision(3)))));
  const maxAbs = Math.max(...vals.map(Math.abs));
  const distinct = new Set(vals).size;
  const make = (f) => splits.map((v) => (v === null ? '' : v === 0 ? '0' : f(v)));
  for (let d = 0; d <= 8; d++) {
    const labels = maxAbs !== 0 && (maxAbs < 1e-3 || maxAbs >= 1e5) ? make((v) => shortExp(v, d + 1)) : make((v) => v.toFixed(d));
    if (new Set(labels.filter((l) => l !== '')).size === distinct) return labels;
  }
  return make((v) => shortExp(v, 6));
}

/**
 * TensorBoard's smoothing: an exponential moving average with weight `w` on the past, debiased
 * (divided by 1 - w^n) so the first points are not pulled towards zero. Nulls pass through.
 */
function ema(values, w) {
  if (w <= 0) return values;
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    n++;
    last = last * w + (1 - w) * v;
    return last / (1 - w ** n);
  });
}

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

/** A JSON file of the run, or null while it is missing or half-written. */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
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
        renderTreeFilters();
        renderTreeList();
      }
      for (const file of ['eval', 'demo']) {
        const text = await fetchText(`/runs/${run.id}/${file}.json`);
        if (text !== null && text !== d[`${file}Text`]) {
          d[`${file}Text`] = text;
          d[file] = parseJson(text);
          changed = true;
        }
      }
    }
  }
  if (changed) render();
  document.getElementById('status').textContent = `updated ${new Date().toLocaleTimeString()} · polling every ${POLL_MS / 1000} s`;
}

/**
 * The evaluated methods of a run: demo.json's rows when present (the untrained pair before
 * training, the trained pair and the baselines after), else the final evaluation's (eval.json).
 * Each is a team drawn as a point (untrained: at the first step, trained: at the last) or a
 * baseline drawn as a dashed horizontal line.
 */
function evalRows(d) {
  const rows = d.demo?.rows ?? d.eval?.rows ?? [];
  return rows
    .filter((r) => typeof r.reward_mean === 'number')
    .map((r) => ({ ...r, kind: /^(magrpo|trained pair)/.test(r.method) ? 'trained' : /^untrained (pair|team)$/.test(r.method) ? 'untrained' : 'baseline' }));
}

/** Series of one chart over all runs: metric series, then the evaluated methods. */
function chartSeries(def) {
  const series = [];
  const keysInOrder = [];
  const multi = state.runs.length > 1;
  for (const run of state.runs) {
    const d = state.data.get(run.id);
    const keys = [...new Set(d.rows.flatMap((r) => Object.keys(r)))].filter((k) => def.match.test(k)).sort();
    for (const k of keys) {
      if (!keysInOrder.includes(k)) keysInOrder.push(k);
      const points = new Map();
      for (const r of d.rows) if (typeof r[k] === 'number') points.set(r.step, r[k]);
      series.push({ label: multi ? `${run.name} · ${k}` : k, run: run.id, key: k, points });
    }
    if (def.evalRows) {
      const steps = d.rows.map((r) => r.step).filter(Number.isFinite);
      const last = steps.length ? Math.max(...steps) : 1;
      for (const row of evalRows(d)) {
        const label = `${multi ? `${run.name} · ` : ''}${row.kind === 'baseline' ? 'baseline ' : 'eval: '}${row.method}`;
        if (row.kind === 'baseline') series.push({ label, run: run.id, constant: row.reward_mean, method: row.method });
        else series.push({ label, run: run.id, at: row.kind === 'untrained' ? 0 : last, value: row.reward_mean, team: row.kind });
      }
    }
  }
  return { series, keysInOrder };
}

function chartCard(def) {
  let c = state.charts.get(def.id);
  if (!c) {
    const card = el(
      'div',
      { class: 'card', 'data-chart': def.id, 'data-points': '0', 'data-series': '0', 'data-xlabel': X_LABEL, 'data-ylabel': def.y },
      el('h3', { text: def.title }),
    );
    document.getElementById(`charts-${def.section}`).append(card);
    c = { card, plot: null, signature: '', legend: null };
    state.charts.set(def.id, c);
  }
  return c;
}

/** Stroke colour and dash of each series: by run when several runs overlay, else by metric. */
function seriesStyle(s, keysInOrder, baselineNames) {
  const runIndex = state.runs.findIndex((r) => r.id === s.run);
  const multi = state.runs.length > 1;
  if (s.constant !== undefined) return { color: multi ? PALETTE[runIndex % PALETTE.length] : BASELINE_COLORS[baselineNames.indexOf(s.method) % BASELINE_COLORS.length], dash: BASELINE_DASH };
  if (s.team) return { color: multi ? PALETTE[runIndex % PALETTE.length] : TEAM_COLORS[s.team], dash: [] };
  const k = keysInOrder.indexOf(s.key);
  return multi ? { color: PALETTE[runIndex % PALETTE.length], dash: DASHES[k % DASHES.length] } : { color: PALETTE[k % PALETTE.length], dash: [] };
}

/** The legend under a chart: one entry per series (colour, dash, name, value under the cursor). */
function renderLegend(c, series, styles) {
  const items = series.map((s, i) =>
    el(
      'li',
      { class: 'legend-item', 'data-run': String(s.run), 'data-color': styles[i].color, 'data-kind': s.constant !== undefined ? 'baseline' : (s.team ?? 'metric') },
      swatch(styles[i].color, styles[i].dash, s.team ? 'point' : 'line'),
      el('span', { class: 'legend-label', text: s.label }),
      el('span', { class: 'legend-value', text: '' }),
    ),
  );
  const legend = el('ul', { class: 'legend' }, ...items);
  if (c.legend) c.legend.replaceWith(legend);
  else c.card.append(legend);
  c.legend = legend;
}

function swatch(color, dash, shape) {
  const s = el('span', { class: `swatch ${shape}` });
  if (shape === 'point') s.style.background = color;
  else {
    s.style.borderTopColor = color;
    s.style.borderTopStyle = dash.length === 0 ? 'solid' : dash[0] <= 2 ? 'dotted' : 'dashed';
  }
  return s;
}

function renderChart(def) {
  const { series, keysInOrder } = chartSeries(def);
  const c = chartCard(def);
  const metricXs = [...new Set(series.filter((s) => s.points).flatMap((s) => [...s.points.keys()]))];
  const evalDrawn = series.filter((s) => s.constant !== undefined || s.team);
  const xs = [...new Set([...metricXs, ...series.filter((s) => s.team).map((s) => s.at)])].sort((a, b) => a - b);
  // Only baselines and no steps at all: still draw them, across a nominal [0, 1].
  if (xs.length === 0 && evalDrawn.length) xs.push(0, 1);
  else if (xs.length === 1 && evalDrawn.length) xs.push(xs[0] + 1);
  c.card.hidden = Boolean(def.optional) && xs.length === 0;
  c.card.dataset.points = String(metricXs.length);
  c.card.dataset.series = String(series.length);
  c.card.dataset.baselines = String(series.filter((s) => s.constant !== undefined).length);
  c.card.dataset.evalrows = String(evalDrawn.length);
  if (xs.length === 0) {
    c.plot?.destroy();
    c.plot = null;
    c.legend?.remove();
    c.legend = null;
    c.signature = '';
    if (!c.card.querySelector('.empty')) c.card.append(el('p', { class: 'empty', text: 'no data yet' }));
    return;
  }
  c.card.querySelector('.empty')?.remove();
  const positive = (v) => (state.log && v !== null && !(v > 0) ? null : v);
  // Per series: its raw values on the shared x axis, and (metrics) the smoothed line drawn over them.
  const raw = series.map((s) => {
    if (s.constant !== undefined) return xs.map(() => s.constant);
    if (s.team) return xs.map((x) => (x === s.at ? s.value : null));
    return xs.map((x) => s.points.get(x) ?? null);
  });
  const smooth = series.map((s, i) => (s.points ? ema(raw[i], state.smoothing) : raw[i]));
  const smoothed = state.smoothing > 0;
  // For tests and scripts: what each legend entry draws (window.__dashboard.series[chart]).
  c.values = series.map((s, i) => ({ label: s.label, raw: raw[i], smooth: smooth[i] }));
  c.xs = xs;
  const data = [xs];
  for (const [i, s] of series.entries()) {
    if (s.points && smoothed) data.push(raw[i].map(positive));
    data.push(smooth[i].map(positive));
  }
  const baselineNames = [...new Set(series.filter((s) => s.method).map((s) => s.method))];
  const styles = series.map((s) => seriesStyle(s, keysInOrder, baselineNames));
  c.card.dataset.colors = styles.map((st) => st.color).join(' ');
  const signature = `${series.map((s) => s.label).join('|')}#${smoothed}#${state.log}#${styles.map((st) => st.color).join()}`;
  if (c.plot && c.signature === signature) {
    c.plot.setData(data);
    return;
  }
  c.plot?.destroy();
  c.signature = signature;
  renderLegend(c, series, styles);
  const uSeries = [{ label: X_LABEL }];
  const legendSlot = []; // uPlot series index of each legend entry
  for (const [i, s] of series.entries()) {
    const { color, dash } = styles[i];
    if (s.points && smoothed) uSeries.push({ label: `${s.label} (raw)`, stroke: `${color}40`, width: 1, dash, spanGaps: true, points: { show: false } });
    legendSlot.push(uSeries.length);
    uSeries.push({
      label: s.label,
      stroke: color,
      fill: s.team ? color : undefined,
      width: s.constant !== undefined ? 1 : 1.5,
      dash,
      spanGaps: true,
      points: s.team ? { show: true, size: 9, fill: color, stroke: color } : { show: xs.length <= 40, size: 4 },
    });
  }
  const yAxisSize = (u, values) => (values ? 18 + 7 * Math.max(3, ...values.map((v) => String(v).length)) : 50);
  const opts = {
    width: Math.max(260, c.card.clientWidth - 14),
    height: 220,
    // A little room at both ends, so the evaluation dots at step 0 and at the end are drawn whole.
    scales: { x: { time: false, range: (_u, min, max) => [min - ((max - min) * 0.03 || 0.5), max + ((max - min) * 0.03 || 0.5)] }, y: state.log ? { distr: 3, log: 10 } : {} },
    axes: [
      { label: X_LABEL, labelSize: 18, size: 34 },
      {
        label: def.y,
        labelSize: 18,
        size: yAxisSize,
        values: (_u, splits) => {
          const labels = tickLabels(splits, state.log);
          c.card.dataset.yticks = labels.join('|');
          return labels;
        },
      },
    ],
    legend: { show: false },
    series: uSeries,
    hooks: {
      setCursor: [
        (u) => {
          const idx = u.cursor.idx;
          const values = c.legend?.querySelectorAll('.legend-value') ?? [];
          for (const [i, v] of [...values].entries()) {
            const y = idx === null || idx === undefined ? undefined : u.data[legendSlot[i]]?.[idx];
            v.textContent = y === null || y === undefined ? '' : fmt(y);
          }
        },
      ],
    },
  };
  c.plot = new uPlot(opts, data, c.card);
  c.card.append(c.legend); // legend below the canvas
  c.card.dataset.drawn = String(uSeries.length - 1);
  c.card.dataset.strokes = uSeries.slice(1).map((u) => u.stroke).join(' ');
  c.card.dataset.scale = c.plot.scales.y.distr === 3 ? 'log' : 'linear';
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
  document.getElementById('latest').replaceChildren(el('div', { class: 'table-wrap' }, table));
}

function renderEvalTable() {
  const parts = [];
  for (const run of state.runs) {
    const d = state.data.get(run.id);
    const rows = d.demo?.rows ?? d.eval?.rows;
    if (!rows) continue;
    const cols = [...new Set(rows.flatMap((r) => Object.keys(r.metrics ?? {})))];
    const what = d.demo?.rows ? 'demo evaluation (untrained pair before training; trained pair and baselines after)' : 'final evaluation';
    const size = d.eval ? `, ${d.eval.items} items × ${d.eval.samples_per_item}` : '';
    parts.push(
      el('h3', { text: `${run.name}: ${what}${size}` }),
      el(
        'div',
        { class: 'table-wrap' },
        el(
          'table',
          { class: 'eval-table' },
          el('tr', {}, ...['method', 'reward', ...cols].map((c) => el('th', { text: c }))),
          ...rows.map((r) =>
            el(
              'tr',
              {},
              el('td', { text: r.method, title: r.description ?? '' }),
              el('td', { text: typeof r.reward_mean === 'number' ? fmt(r.reward_mean) : '–' }),
              ...cols.map((c) => el('td', { text: c in (r.metrics ?? {}) ? fmt(r.metrics[c]) : '–' })),
            ),
          ),
        ),
      ),
    );
  }
  document.getElementById('eval-table').replaceChildren(...parts);
}

/** Every node of a rollout tree, depth first. */
function* treeNodes(node) {
  yield node;
  for (const c of node.children ?? []) if (c) yield* treeNodes(c);
}

/** The agent select lists as many agents as the recorded trees have. */
function renderTreeFilters() {
  const n = Math.max(0, ...state.runs.flatMap((run) => (state.data.get(run.id).samples ?? []).map((s) => s.tree?.prompts?.length ?? 0)));
  const select = document.getElementById('f-agent');
  if (select.options.length === n + 1) return;
  select.replaceChildren(el('option', { value: '', text: 'all' }), ...Array.from({ length: n }, (_, a) => el('option', { value: String(a), text: `agent ${a}` })));
  select.value = state.filter.agent;
}

/**
 * Whether a recorded tree passes the browser's filters: item (exact), reward range (mean reward of
 * the first turn), and text (case-insensitive, in any turn's prompts and completions; of the
 * chosen agent only when one is chosen).
 */
function treeMatches(s, f) {
  if (f.item.trim() !== '' && String(s.item) !== f.item.trim()) return false;
  const r = mean(s.tree.rewards);
  if (f.min !== '' && !(r >= Number(f.min))) return false;
  if (f.max !== '' && !(r <= Number(f.max))) return false;
  const q = f.text.trim().toLowerCase();
  if (q === '') return true;
  const agent = f.agent === '' ? null : Number(f.agent);
  for (const node of treeNodes(s.tree)) {
    const texts = agent === null ? [...node.prompts, ...node.completions.flat()] : [node.prompts[agent] ?? '', ...(node.completions[agent] ?? [])];
    if (texts.some((t) => String(t).toLowerCase().includes(q))) return true;
  }
  return false;
}

function renderTreeList() {
  const all = state.runs.flatMap((run) => (state.data.get(run.id).samples ?? []).map((s, i) => ({ run, s, i })));
  const items = all.filter(({ s }) => treeMatches(s, state.filter));
  const pages = Math.max(1, Math.ceil(items.length / PAGE_SIZE));
  state.filter.page = Math.min(state.filter.page, pages - 1);
  const from = state.filter.page * PAGE_SIZE;
  const page = items.slice(from, from + PAGE_SIZE);
  const list = document.getElementById('tree-list');
  list.dataset.total = String(all.length);
  list.dataset.matches = String(items.length);
  list.replaceChildren(
    ...page.map(({ run, s, i }) => {
      const label = `${state.runs.length > 1 ? `${run.name} · ` : ''}item ${s.item} · step ${s.env_step} · reward ${fmt(mean(s.tree.rewards))}`;
      const id = `${run.id}:${i}`;
      const button = el('button', { type: 'button', 'data-tree': id, 'aria-pressed': String(state.selected === id), onclick: () => selectTree(id), text: label });
      return el('li', {}, button);
    }),
  );
  if (page.length === 0) list.append(el('li', { class: 'empty', text: all.length ? 'no tree matches the filters' : 'no recorded trees yet' }));
  document.getElementById('page-info').textContent = items.length
    ? `${from + 1}–${from + page.length} of ${items.length}${items.length < all.length ? ` (${all.length} recorded)` : ''} · page ${state.filter.page + 1}/${pages}`
    : `0 of ${all.length}`;
  document.getElementById('page-prev').disabled = state.filter.page === 0;
  document.getElementById('page-next').disabled = state.filter.page >= pages - 1;
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
  // With an agent chosen in the filters, only that agent's prompt and completions are shown.
  const only = state.filter.agent === '' ? null : Number(state.filter.agent);
  const agents = node.prompts.map((prompt, a) =>
    only !== null && a !== only
      ? null
      : el(
          'div',
          { class: 'agent', 'data-agent': String(a) },
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
    el('div', { class: 'table-wrap' }, table),
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
    series: Object.fromEntries([...state.charts].map(([id, c]) => [id, { xs: c.xs ?? [], values: c.values ?? [] }])),
  };
}

/** Redraw every chart from scratch (smoothing or scale changed). */
function redrawCharts() {
  for (const c of state.charts.values()) c.signature = '';
  render();
}

/** The chart controls (smoothing, log scale) and the tree browser's filters and pager. */
function wireControls() {
  const slider = document.getElementById('smoothing');
  const shown = document.getElementById('smoothing-value');
  slider.value = String(state.smoothing);
  shown.textContent = state.smoothing.toFixed(2);
  slider.addEventListener('input', () => {
    state.smoothing = Math.min(0.999, Math.max(0, Number(slider.value)));
    shown.textContent = state.smoothing.toFixed(2);
    redrawCharts();
  });
  document.getElementById('log-scale').addEventListener('change', (e) => {
    state.log = e.target.checked;
    redrawCharts();
  });
  const fields = { item: 'f-item', agent: 'f-agent', min: 'f-min', max: 'f-max', text: 'f-text' };
  for (const [key, id] of Object.entries(fields)) {
    document.getElementById(id).addEventListener('input', (e) => {
      state.filter[key] = e.target.value;
      state.filter.page = 0;
      renderTreeList();
      if (key === 'agent' && state.selected) selectTree(state.selected);
    });
  }
  document.getElementById('tree-filter').addEventListener('submit', (e) => e.preventDefault());
  document.getElementById('page-prev').addEventListener('click', () => {
    state.filter.page = Math.max(0, state.filter.page - 1);
    renderTreeList();
  });
  document.getElementById('page-next').addEventListener('click', () => {
    state.filter.page++;
    renderTreeList();
  });
}

async function main() {
  state.runs = await (await fetch('/api/runs', { cache: 'no-store' })).json();
  const multi = state.runs.length > 1;
  // The header names the runs; with several, each chip shows the run's colour in every chart.
  document.getElementById('runs').replaceChildren(
    ...state.runs.map((r, i) =>
      el('span', { class: 'run-chip', title: r.name, 'data-color': multi ? PALETTE[i % PALETTE.length] : '' }, multi ? swatch(PALETTE[i % PALETTE.length], [], 'line') : null, r.name),
    ),
  );
  for (const r of state.runs) state.data.set(r.id, { rows: [], samples: [], eval: null, demo: null, metricsLength: -1, samplesLength: -1, evalText: null, demoText: null });
  wireControls();
  await poll();
  render();
  document.body.dataset.ready = 'true';
  setInterval(() => poll().catch((e) => (document.getElementById('status').textContent = `poll failed: ${e}`)), POLL_MS);
  window.addEventListener('resize', () => {
    for (const c of state.charts.values()) c.plot?.setSize({ width: Math.max(260, c.card.clientWidth - 14), height: 220 });
  });
}

main().catch((e) => {
  document.getElementById('status').textContent = `failed to load: ${e}`;
});
