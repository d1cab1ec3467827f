/**
 * The dashboard in a real browser (Debian's chromium through playwright-core, no download): the
 * recorded fixture run's charts have one point per logged env step, baselines are drawn, a
 * rollout tree opens, new metrics appear live, and several runs overlay in one colour each with
 * a legend. A demo-shaped run (demo.json, no periodic eval, a 5e-6 learning rate, 57 recorded
 * trees) checks the evaluation chart, axis titles, tiny tick labels, EMA smoothing, the log scale,
 * the tree browser's filters and pages, and an 800 px wide window. Screenshots go to
 * test-artifacts/ (not committed). Skipped where /usr/bin/chromium is missing
 * (`bash scripts/setup.sh --with-browser` installs it; scripts/test.sh does).
 */
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { type DashboardServer, startDashboard } from '../../src/dashboard/server.js';
import { optionalSkip } from '../helpers/skip.js';

const CHROMIUM = '/usr/bin/chromium';
const FIXTURE = resolve(import.meta.dirname, 'fixtures', 'run-coordination');
const ARTIFACTS = resolve(import.meta.dirname, '..', '..', 'test-artifacts');
const skip = optionalSkip('browser', !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (bash scripts/setup.sh --with-browser)`);

type Row = Record<string, number>;
const rows: Row[] = readFileSync(join(FIXTURE, 'metrics.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));
/** The shared machine can be slow (a training job has priority): generous browser timeouts. */
const TIMEOUT = 180_000;
/** Distinct env steps at which some metric matching `re` was logged: the chart's x values. */
const steps = (re: RegExp, from = rows) => new Set(from.filter((r) => Object.keys(r).some((k) => re.test(k))).map((r) => r.step)).size;

let tmp = '';
let ctx: BrowserContext;
before(async () => {
  if (skip) return;
  tmp = mkdtempSync(join(tmpdir(), 'magrpo-browser-'));
  ctx = await chromium.launchPersistentContext(join(tmp, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});
after(async () => {
  await ctx?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function open(server: DashboardServer): Promise<Page> {
  const page = await ctx.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.setDefaultNavigationTimeout(TIMEOUT);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.waitForSelector('body[data-ready="true"]');
  assert.deepEqual(errors, []);
  return page;
}
const attr = (page: Page, chart: string, name: string) => page.getAttribute(`[data-chart="${chart}"]`, `data-${name}`).then(Number);

describe('dashboard in chromium', { skip }, () => {
  it('charts the recorded run, draws baselines, opens a rollout tree; screenshot', async () => {
    const server = await startDashboard({ runs: [FIXTURE], port: 0 });
    try {
      const page = await open(server);
      const expected: [string, RegExp][] = [
        ['reward', /^turn_\d+\/(reward_mean|expected_return)$/],
        ['components', /^turn_\d+\/reward\//],
        ['loss', /^agent_\d+\/loss$/],
        ['grad_norm', /^agent_\d+\/grad_norm$/],
        ['entropy', /^agent_\d+\/entropy$/],
        ['completion_length', /^agent_\d+\/completion_length$/],
        ['timing', /^time\//],
        ['eval', /^eval\/turn_\d+\/(reward_mean|expected_return)$/],
      ];
      for (const [chart, re] of expected) {
        const n = steps(re);
        assert.ok(n > 1, `${chart}: fixture has data`);
        assert.equal(await attr(page, chart, 'points'), n, chart);
        assert.equal(await page.locator(`[data-chart="${chart}"] canvas`).count(), 1, `${chart} drew a canvas`);
      }
      assert.equal(await attr(page, 'loss', 'series'), 2, 'one loss series per agent');
      const evalRows = JSON.parse(readFileSync(join(FIXTURE, 'eval.json'), 'utf8')).rows as { method: string }[];
      assert.equal(await attr(page, 'eval', 'baselines'), evalRows.filter((r) => r.method !== 'magrpo').length);
      assert.equal(await page.locator('.eval-table tr').count(), evalRows.length + 1);
      assert.equal(await attr(page, 'eval', 'evalrows'), evalRows.length, 'the trained team as a point, the others as lines');

      const records = readFileSync(join(FIXTURE, 'samples.jsonl'), 'utf8').trim().split('\n');
      assert.equal(await page.locator('#tree-list button').count(), records.length);
      await page.click('#tree-list button >> nth=3');
      const tree = JSON.parse(records[3]).tree;
      const node = page.locator(`#tree-view details.node[data-node="0-${tree.env_step}"]`);
      assert.equal(await node.count(), 1);
      assert.equal(await node.locator('pre.completion').count(), tree.completions.flat().length);
      assert.equal(await node.locator('table.joint tr').count(), tree.joint.length + 1);
      assert.deepEqual(await node.locator('pre.prompt').allTextContents(), tree.prompts);

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
      assert.ok(existsSync(join(ARTIFACTS, 'dashboard.png')));
    } finally {
      await server.close();
    }
  });

  it('live: a metric appended to metrics.jsonl shows up without reloading', async () => {
    const run = join(tmp, 'live-run');
    cpSync(FIXTURE, run, { recursive: true });
    const server = await startDashboard({ runs: [run], port: 0 });
    try {
      const page = await open(server);
      const before = await attr(page, 'loss', 'points');
      const last = rows[rows.length - 1].step;
      appendFileSync(join(run, 'metrics.jsonl'), `${JSON.stringify({ step: last + 4, 'agent_0/loss': 0.5, 'agent_1/loss': 0.25 })}\n`);
      await page.waitForFunction((n) => Number(document.querySelector('[data-chart="loss"]')?.getAttribute('data-points')) === n, before + 1, {
        timeout: TIMEOUT,
      });
    } finally {
      await server.close();
    }
  });

  it('comparison: two runs overlay, one series per metric and run', async () => {
    const server = await startDashboard({ runs: [FIXTURE, FIXTURE], port: 0 });
    try {
      const page = await open(server);
      assert.equal(await attr(page, 'loss', 'series'), 4);
      assert.equal(await attr(page, 'loss', 'points'), steps(/^agent_\d+\/loss$/));
      assert.equal(await page.locator('#runs .run-chip').count(), 2);
      assert.equal(await page.locator('#latest-table tr').count(), 3);
      // One colour per run: every loss line of a run has the run's colour, shown on its header chip.
      const chips = await page.locator('#runs .run-chip').evaluateAll((es) => es.map((e) => e.getAttribute('data-color')));
      assert.equal(new Set(chips).size, 2, `distinct run colours ${chips}`);
      const legend = await page
        .locator('[data-chart="loss"] .legend-item')
        .evaluateAll((es) => es.map((e) => ({ run: Number(e.getAttribute('data-run')), color: e.getAttribute('data-color'), text: e.textContent })));
      assert.equal(legend.length, 4, 'a legend entry per series');
      for (const item of legend) assert.equal(item.color, chips[item.run], `${item.text} drawn in its run's colour`);
      const name = FIXTURE.split('/').pop() as string;
      assert.ok(
        legend.every((i) => i.text?.startsWith(`${name} · agent_`)),
        'legend names the run and the metric',
      );
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-comparison.png'), fullPage: true });
    } finally {
      await server.close();
    }
  });

  it('model-written strings render as text: markup in completions, prompts, names and eval rows never runs', async () => {
    // Payloads a policy could learn to write; each would set window.__pwned or open a dialog if it ran.
    const payloads = [
      '<img src=x onerror=alert(1)>',
      '<img src=x onerror="window.__pwned=1">',
      '<script>window.__pwned=2</script>',
      '"><svg onload="window.__pwned=3">',
      "'><iframe srcdoc='<script>parent.__pwned=4</script>'>",
      '<a href="javascript:window.__pwned=5">x</a>',
      '{{constructor.constructor("window.__pwned=6")()}}',
    ];
    const run = join(tmp, '<img src=x onerror=alert(1)>');
    cpSync(FIXTURE, run, { recursive: true });
    const records = readFileSync(join(run, 'samples.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const tree = records[0].tree;
    tree.prompts = [payloads[0], payloads[2]];
    tree.completions = [payloads.slice(0, 4), payloads.slice(3, 7)];
    tree.components = tree.components.map(() => ({ [payloads[1]]: 1 }));
    records[0].item = payloads[3];
    writeFileSync(join(run, 'samples.jsonl'), `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
    const ev = JSON.parse(readFileSync(join(run, 'eval.json'), 'utf8'));
    ev.rows[1].method = payloads[0];
    ev.rows[1].description = payloads[3];
    ev.rows[1].metrics[payloads[2]] = 1;
    writeFileSync(join(run, 'eval.json'), JSON.stringify(ev));
    appendFileSync(join(run, 'metrics.jsonl'), `${JSON.stringify({ step: 10_000, [`eval/${payloads[1]}`]: 1, [`turn_1/reward/${payloads[0]}`]: 0.5 })}\n`);

    const server = await startDashboard({ runs: [run], port: 0 });
    try {
      const page = await ctx.newPage();
      page.setDefaultTimeout(TIMEOUT);
      page.setDefaultNavigationTimeout(TIMEOUT);
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]');
      await page.click('#tree-list button >> nth=0');
      await page.waitForSelector('#tree-view pre.completion');
      // Let any injected handler fire (images error out at once; iframes load).
      await page.waitForTimeout(500);
      assert.deepEqual(dialogs, []);
      assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
      assert.equal(await page.locator('main img, main svg, main iframe, main script, main a[href^="javascript"]').count(), 0, 'no markup became elements');
      // ...and every payload is shown verbatim, as text.
      const completions = await page.locator('#tree-view pre.completion').allTextContents();
      for (const p of [...payloads.slice(0, 4), ...payloads.slice(3, 7)]) assert.ok(completions.includes(p), `completion ${p} shown as text`);
      assert.deepEqual(await page.locator('#tree-view pre.prompt').allTextContents(), [payloads[0], payloads[2]]);
      const text = (await page.locator('body').textContent()) ?? '';
      for (const p of [payloads[0], payloads[1], payloads[3]]) assert.ok(text.includes(p), `${p} visible as text`);
      assert.ok(text.includes(`${payloads[0]}: final evaluation`), 'the run name (a directory called <img ...>) is text');
    } finally {
      await server.close();
    }
  });
  it('demo run: evaluations drawn, axis titles, tiny ticks, smoothing, log scale, tree filters and pages, 800 px; screenshots', async () => {
    const run = join(tmp, 'demo-tldr-seed0');
    mkdirSync(run, { recursive: true });
    // A demo-shaped run: no periodic eval in metrics.jsonl, a decaying 5e-6 learning rate, fluency.
    const steps = 60;
    const metrics = Array.from({ length: steps }, (_, i) => ({
      step: (i + 1) * 4,
      'turn_1/reward_mean': 0.3 + (0.5 * i) / steps + 0.2 * Math.sin(i * 1.7),
      'agent_0/lr': 5e-6 - (4e-6 * i) / steps,
      'agent_1/lr': 5e-6 - (4e-6 * i) / steps,
      'agent_0/loss': 0.1 * Math.cos(i),
      'agent_1/loss': 0.1 * Math.sin(i),
      'agent_0/word_validity': 0.9 - (0.2 * i) / steps,
      'agent_1/word_validity': 0.85,
    }));
    writeFileSync(join(run, 'metrics.jsonl'), `${metrics.map((m) => JSON.stringify(m)).join('\n')}\n`);
    const wide = Object.fromEntries(Array.from({ length: 14 }, (_, k) => [`a_rather_long_metric_name_${k}`, k / 7]));
    const demoRows = [
      { method: 'trained pair (MAGRPO)', description: 'the trained team', metrics: { return: 0.71, ...wide }, reward_mean: 0.71 },
      { method: 'oracle summary', description: 'a baseline', metrics: { return: 0.9, ...wide }, reward_mean: 0.9 },
      { method: 'single model', description: 'a baseline', metrics: { return: 0.4, ...wide }, reward_mean: 0.4 },
      { method: 'untrained pair', description: 'the base models before training', metrics: { return: 0.22, ...wide }, reward_mean: 0.22 },
    ];
    const evalJson = { env: 'tldr', items: 8, samples_per_item: 1, sampling: {}, rows: [{ ...demoRows[0], method: 'magrpo' }, ...demoRows.slice(1, 3)] };
    writeFileSync(join(run, 'eval.json'), JSON.stringify(evalJson));
    writeFileSync(join(run, 'demo.json'), JSON.stringify({ env: 'tldr', seed: 0, rows: demoRows }));
    // 57 recorded trees: items 0..18, rewards 0..1, a "needle" in agent 0's text every 5th, agent 1's every 7th.
    const template = JSON.parse(readFileSync(join(FIXTURE, 'samples.jsonl'), 'utf8').split('\n')[0]);
    const records = Array.from({ length: 57 }, (_, i) => {
      const tree = structuredClone(template.tree);
      tree.env_step = (i + 1) * 4;
      tree.prompts = [`Summarise post ${i}: the cat sat on the mat`, `Expand summary ${i}`];
      tree.completions = [
        [i % 5 === 0 ? 'a Needle here' : 'plain words', 'more', 'text', 'x'],
        [i % 7 === 0 ? 'needle again' : 'other words', 'y', 'z', 'w'],
      ];
      tree.rewards = tree.rewards.map(() => i / 56);
      return { item: i % 19, env_step: tree.env_step, time: 0, tree };
    });
    writeFileSync(join(run, 'samples.jsonl'), `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);

    const server = await startDashboard({ runs: [run], port: 0 });
    mkdirSync(ARTIFACTS, { recursive: true });
    try {
      const page = await open(server);
      // The evaluation chart draws demo.json: two teams as points, two baselines as lines.
      assert.equal(await page.locator('[data-chart="eval"] .empty').count(), 0, 'no "no data yet"');
      assert.equal(await page.locator('[data-chart="eval"] canvas').count(), 1);
      assert.equal(await attr(page, 'eval', 'evalrows'), 4);
      assert.equal(await attr(page, 'eval', 'baselines'), 2);
      const evalLegend = await page.locator('[data-chart="eval"] .legend-label').allTextContents();
      assert.deepEqual(evalLegend.sort(), ['baseline oracle summary', 'baseline single model', 'eval: trained pair (MAGRPO)', 'eval: untrained pair']);
      const evalSeries = await page.evaluate(() => (window as unknown as { __dashboard: Dash }).__dashboard.series.eval);
      const untrained = evalSeries.values.find((v) => v.label === 'eval: untrained pair');
      const trained = evalSeries.values.find((v) => v.label === 'eval: trained pair (MAGRPO)');
      assert.equal(untrained?.raw[evalSeries.xs.indexOf(0)], 0.22, 'untrained pair at step 0');
      assert.equal(trained?.raw[evalSeries.xs.indexOf(steps * 4)], 0.71, 'trained pair at the last step');
      assert.equal(await page.locator('.eval-table tr').count(), demoRows.length + 1, 'the eval table lists demo.json');

      // Axis titles on every drawn chart; the learning rate's ticks read 1e-6…5e-6, not "0".
      for (const card of await page.locator('.card:not([hidden])').all()) {
        assert.equal(await card.getAttribute('data-xlabel'), 'env step');
        assert.ok(((await card.getAttribute('data-ylabel')) ?? '').length > 1, 'y axis title');
      }
      assert.equal(await page.getAttribute('[data-chart="lr"]', 'data-ylabel'), 'learning rate');
      const ticks = ((await page.getAttribute('[data-chart="lr"]', 'data-yticks')) ?? '').split('|').filter((t) => t !== '');
      const nonzero = ticks.filter((t) => Number(t) !== 0);
      assert.ok(nonzero.length >= 2, `lr ticks ${ticks}`);
      assert.equal(new Set(ticks).size, ticks.length, `distinct lr ticks ${ticks}`);
      for (const t of nonzero) assert.match(t, /^\d(\.\d+)?e-6$/, `lr tick ${t}`);
      assert.equal(await page.locator('[data-chart="fluency"]:not([hidden]) canvas').count(), 1, 'fluency chart drawn');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-demo.png'), fullPage: true });

      // Smoothing: a debiased EMA of the raw values, drawn over a faint raw line.
      const rewardOf = () => page.evaluate(() => (window as unknown as { __dashboard: Dash }).__dashboard.series.reward.values[0]);
      const setSmoothing = (w: number) =>
        page.evaluate((v) => {
          const s = document.getElementById('smoothing') as HTMLInputElement;
          s.value = String(v);
          s.dispatchEvent(new Event('input'));
        }, w);
      await setSmoothing(0.9);
      const r = await rewardOf();
      let last = 0;
      const expected = r.raw.map((x, n) => {
        last = last * 0.9 + 0.1 * (x as number);
        return last / (1 - 0.9 ** (n + 1));
      });
      for (const [i, v] of r.smooth.entries()) assert.ok(Math.abs((v as number) - expected[i]) < 1e-9, `smoothed[${i}]`);
      assert.ok(Math.abs((r.smooth[0] as number) - (r.raw[0] as number)) < 1e-12, 'debiased: the first smoothed point is the first raw point');
      const rawSpread = Math.max(...(r.raw as number[])) - Math.min(...(r.raw as number[]));
      const smoothSpread = Math.max(...(r.smooth as number[])) - Math.min(...(r.smooth as number[]));
      assert.ok(smoothSpread < rawSpread * 0.8, `smoothing reduces the noise (${smoothSpread} vs ${rawSpread})`);
      assert.equal(await attr(page, 'reward', 'drawn'), 2, 'raw and smoothed lines');
      const [rawStroke, smoothStroke] = ((await page.getAttribute('[data-chart="reward"]', 'data-strokes')) ?? '').split(' ');
      assert.equal(rawStroke, `${smoothStroke}40`, 'the raw line is the same colour, faint');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-smoothing.png'), fullPage: false });
      await setSmoothing(0);
      assert.equal(await attr(page, 'reward', 'drawn'), 1, 'no smoothing: the raw line alone');
      assert.deepEqual((await rewardOf()).smooth, (await rewardOf()).raw);

      // Log scale.
      assert.equal(await page.getAttribute('[data-chart="loss"]', 'data-scale'), 'linear');
      await page.check('#log-scale');
      assert.equal(await page.getAttribute('[data-chart="loss"]', 'data-scale'), 'log');
      assert.equal(await page.getAttribute('[data-chart="lr"]', 'data-scale'), 'log');
      const logTicks = ((await page.getAttribute('[data-chart="lr"]', 'data-yticks')) ?? '').split('|').filter((t) => t !== '');
      assert.ok(logTicks.length >= 1 && logTicks.every((t) => Number(t) > 0 && Number(t) < 1e-4), `log lr ticks ${logTicks}`);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-log.png'), fullPage: false });
      await page.uncheck('#log-scale');

      // The tree browser: 20 per page, filters by item, agent, reward range and text.
      const listed = () => page.locator('#tree-list button').count();
      const matches = () => page.getAttribute('#tree-list', 'data-matches').then(Number);
      assert.equal(await listed(), 20);
      assert.match((await page.textContent('#page-info')) ?? '', /^1–20 of 57/);
      assert.equal(await page.isDisabled('#page-prev'), true);
      await page.click('#page-next');
      await page.click('#page-next');
      assert.equal(await listed(), 17, 'the last page');
      assert.equal(await page.isDisabled('#page-next'), true);
      await page.fill('#f-item', '3');
      assert.equal(await matches(), records.filter((x) => x.item === 3).length);
      assert.equal(await listed(), records.filter((x) => x.item === 3).length, 'a filter goes back to page 1');
      await page.fill('#f-item', '');
      await page.fill('#f-text', 'NEEDLE');
      const needle = (i: number, agent?: number) => (agent === 0 ? i % 5 === 0 : agent === 1 ? i % 7 === 0 : i % 5 === 0 || i % 7 === 0);
      assert.equal(await matches(), records.filter((_, i) => needle(i)).length);
      await page.selectOption('#f-agent', '1');
      assert.equal(await matches(), records.filter((_, i) => needle(i, 1)).length);
      await page.fill('#f-min', '0.5');
      assert.equal(await matches(), records.filter((x, i) => needle(i, 1) && x.tree.rewards[0] >= 0.5).length);
      await page.fill('#f-max', '0.9');
      const both = records.filter((x, i) => needle(i, 1) && x.tree.rewards[0] >= 0.5 && x.tree.rewards[0] <= 0.9);
      assert.ok(both.length > 0);
      assert.equal(await matches(), both.length);
      await page.fill('#f-text', 'no such text anywhere');
      assert.equal(await matches(), 0);
      assert.equal(await page.locator('#tree-list .empty').count(), 1);
      await page.fill('#f-text', 'needle');
      await page.click('#tree-list button >> nth=0');
      assert.deepEqual(
        await page.locator('#tree-view details.node > .agents > .agent').evaluateAll((es) => es.map((e) => e.getAttribute('data-agent'))),
        ['1'],
        'the chosen agent only',
      );
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-trees.png'), fullPage: true });

      // 800 px wide: nothing wider than the window (wide tables scroll in their own box).
      await page.setViewportSize({ width: 800, height: 900 });
      await page.waitForFunction(() => document.documentElement.clientWidth === 800);
      const overflow = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
      assert.ok(overflow.scroll <= overflow.client, `page ${overflow.scroll} px wide in an ${overflow.client} px window`);
      const cut = await page.evaluate(() =>
        [...document.querySelectorAll('main *')]
          .filter((e) => !e.closest('.table-wrap, pre, #tree-list'))
          .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
          .map((e) => e.tagName + (e.id ? `#${e.id}` : '')),
      );
      assert.deepEqual(cut, [], 'no element sticks out on the right');
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-800px.png'), fullPage: true });
    } finally {
      await server.close();
    }
  });
});

interface Dash {
  series: Record<string, { xs: number[]; values: { label: string; raw: (number | null)[]; smooth: (number | null)[] }[] }>;
}
