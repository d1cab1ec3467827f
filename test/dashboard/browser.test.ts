/**
 * The dashboard in a real browser (Debian's chromium through playwright-core, no download): the
 * recorded fixture run's charts have one point per logged env step, baselines are drawn, a
 * rollout tree opens, new metrics appear live, and several runs overlay. Screenshot:
 * test-artifacts/dashboard.png. Skipped where /usr/bin/chromium is missing
 * (`bash scripts/setup.sh --with-browser` installs it; scripts/test.sh does).
 */
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { type DashboardServer, startDashboard } from '../../src/dashboard/server.js';

const CHROMIUM = '/usr/bin/chromium';
const FIXTURE = resolve(import.meta.dirname, 'fixtures', 'run-coordination');
const ARTIFACTS = resolve(import.meta.dirname, '..', '..', 'test-artifacts');
const skip = existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (bash scripts/setup.sh --with-browser)`;

type Row = Record<string, number>;
const rows: Row[] = readFileSync(join(FIXTURE, 'metrics.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));
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
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 15000 });
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
        timeout: 15000,
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
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      await page.goto(server.url);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 15000 });
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
});
