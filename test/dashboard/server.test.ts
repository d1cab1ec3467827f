/** The dashboard server: loopback only, page and uPlot served, only whitelisted run files reachable. */
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DashboardServer, startDashboard } from '../../src/dashboard/server.js';

const RUN = resolve(import.meta.dirname, 'fixtures', 'run-coordination');
let server: DashboardServer;
before(async () => {
  server = await startDashboard({ runs: [RUN, RUN], port: 0 });
});
after(() => server.close());

const get = (path: string) => fetch(new URL(path, server.url));

describe('dashboard server', () => {
  it('listens on 127.0.0.1 only', () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  });

  it('serves the page, its script and uPlot', async () => {
    const page = await get('/');
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script src="\/vendor\/uPlot\.iife\.min\.js"><\/script>/);
    assert.equal((await get('/app.js')).status, 200);
    const uplot = await get('/vendor/uPlot.iife.min.js');
    assert.equal(uplot.status, 200);
    assert.match(await uplot.text(), /uPlot/);
  });

  it('lists the runs and serves their JSONL files', async () => {
    assert.deepEqual(await (await get('/api/runs')).json(), [
      { id: 0, name: 'run-coordination' },
      { id: 1, name: 'run-coordination' },
    ]);
    const metrics = await (await get('/runs/1/metrics.jsonl')).text();
    assert.equal(metrics.trim().split('\n').length, 41);
    assert.equal((await get('/runs/0/eval.json')).status, 200);
  });

  it('refuses everything else: other files, unknown runs, path tricks', async () => {
    for (const path of [
      '/runs/0/checkpoints',
      '/runs/0/final',
      '/runs/2/metrics.jsonl',
      '/runs/0/..%2F..%2Fpackage.json',
      '/runs/0/../../package.json',
      '/vendor/../package.json',
    ]) {
      const r = await get(path);
      assert.equal(r.status, 404, path);
    }
  });
});
