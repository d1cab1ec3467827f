/** The dashboard server: loopback only, page and uPlot served, only whitelisted run files reachable. */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DashboardServer, MAX_URL_BYTES, safeSegments, startDashboard } from '../../src/dashboard/server.js';

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
      assert.ok(r.status === 400 || r.status === 404, `${path} -> ${r.status}`);
    }
  });

  /** Sends `target` verbatim (fetch and URL would normalise `..` and backslashes away first). */
  function raw(target: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
    return new Promise((ok, fail) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: target, method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', fail);
      req.end(opts.body);
    });
  }

  // Every encoding of "leave the run directory" we could think of; each must be refused, none may
  // return a byte of package.json, /etc/passwd or a checkpoint.
  const TRAVERSALS = [
    '/runs/0/../../package.json',
    '/runs/0/..%2F..%2Fpackage.json',
    '/runs/0/%2e%2e/%2e%2e/package.json',
    '/runs/0/%2E%2E%2F%2E%2E%2Fpackage.json',
    '/runs/0/%252e%252e%252fpackage.json',
    '/runs/0/%25252e%25252e/package.json',
    '/runs/0/..\\..\\package.json',
    '/runs/0/..%5C..%5Cpackage.json',
    '/runs/0/%5c..%5cpackage.json',
    '/runs/0//etc/passwd',
    '/runs/0/%2Fetc%2Fpasswd',
    '//etc/passwd',
    '/%2e%2e/%2e%2e/%2e%2e/etc/passwd',
    '/..%2f..%2f..%2fetc%2fpasswd',
    '/runs/0/metrics.jsonl%00.png',
    '/runs/0/metrics.jsonl%00',
    '/app.js%00',
    '/runs/0/%c0%ae%c0%ae/package.json',
    '/runs/0/.%2e/config.yaml',
    '/runs/0/checkpoints/latest',
    '/runs/0/./metrics.jsonl',
    '/runs/-1/metrics.jsonl',
    '/runs/00000000001/metrics.jsonl',
    '/vendor/../../package.json',
    '/vendor/%2e%2e/package.json',
    '/vendor/uPlot.esm.js',
    '/vendor/../../../etc/passwd',
    '/static/../server.ts',
    '/%2e%2e/server.ts',
    '/..%5cserver.ts',
    '/C:%5CWindows%5Cwin.ini',
    '/runs/0/%%32%65%%32%65/package.json',
  ];

  it(`refuses path traversal in every encoding (${TRAVERSALS.length} targets)`, async () => {
    for (const target of TRAVERSALS) {
      const r = await raw(target);
      assert.ok(r.status === 400 || r.status === 404, `${target} -> ${r.status}`);
      assert.doesNotMatch(r.body, /"name": "magrpo"|root:x:0|trainer_state|export async function/, target);
    }
    // and the same files are served under their plain names
    assert.equal((await raw('/runs/0/metrics.jsonl')).status, 200);
    assert.equal((await raw('/runs/0/metrics.jsonl?t=1')).status, 200);
  });

  it('safeSegments decodes once and refuses what could name another file', () => {
    assert.deepEqual(safeSegments('/runs/0/metrics.jsonl?x=..'), ['runs', '0', 'metrics.jsonl']);
    assert.deepEqual(safeSegments('/'), []);
    for (const t of ['/a/%2e%2e', '/a/%252e', '/a//b', '/a/b%5cc', '/a%00', '/%ff', 'relative', `/${'a'.repeat(MAX_URL_BYTES)}`, '/a/%0a']) {
      assert.equal(safeSegments(t), null, t);
    }
  });

  it('bounds requests: methods, bodies, URL and header sizes, foreign Host headers', async () => {
    assert.equal((await raw('/api/runs', { method: 'POST', body: 'x' })).status, 405);
    assert.equal((await raw('/api/runs', { method: 'PUT' })).status, 405);
    assert.equal((await raw('/api/runs', { headers: { 'Content-Length': String(1 << 30) } })).status, 413);
    assert.equal((await raw(`/runs/0/${'a'.repeat(MAX_URL_BYTES)}`)).status, 414);
    assert.equal((await raw('/', { headers: { 'X-Big': 'b'.repeat(64 * 1024) } })).status, 431);
    // DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host.
    assert.equal((await raw('/runs/0/metrics.jsonl', { headers: { Host: 'evil.example' } })).status, 421);
    assert.equal((await raw('/runs/0/metrics.jsonl', { headers: { Host: `localhost:${server.port}` } })).status, 200);
    // A huge body sent anyway is never read: the server answers and closes the connection.
    const answer = await new Promise<string>((ok, fail) => {
      const s = connect(server.port, '127.0.0.1', () => {
        s.write(`POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nContent-Length: 1000000000\r\n\r\n`);
        s.write(Buffer.alloc(1 << 20));
      });
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString()));
      s.on('close', () => ok(got));
      s.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' || e.code === 'EPIPE' ? ok(got) : fail(e)));
    });
    assert.match(answer, /^HTTP\/1\.1 405/);
    // The page forbids inline script whatever it renders.
    const page = await get('/');
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  });
});
