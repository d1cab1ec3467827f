/** `magrpo bench`: the JSON report of one small size (no timing assertions: only that every figure is there). */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const bench = (...args: string[]) => spawnSync(process.execPath, [...process.execArgv, main, 'bench', ...args], { encoding: 'utf8' });

describe('magrpo bench', () => {
  it('--json prints one object with the peak, matmul and per-size throughput and memory', () => {
    const r = bench('--sizes', '1m', '--quick', '--no-torch', '--json', '--threads', '1');
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.threads, 1);
    assert.equal(out.peak_gflops, out.cpu.cores * out.cpu.ghz * out.cpu.flops_per_cycle);
    assert.deepEqual(Object.keys(out.matmul_gflops), ['1024x1024x1024', '512x768x3072']);
    for (const g of Object.values(out.matmul_gflops_single_core)) assert.ok((g as number) > 0);
    assert.deepEqual(Object.keys(out.sizes), ['1m']);
    const s = out.sizes['1m'];
    assert.equal(s.params, 1000576);
    assert.ok(s.train_tokens_per_s > 0 && s.peak_rss_mb > 0);
    assert.deepEqual(Object.keys(s.sample_tokens_per_s), ['8', '32']);
    assert.equal(s.torch_train_tokens_per_s, undefined);
    assert.match(out.torch, /--no-torch/);
  });

  it('rejects an unknown size, naming the known ones', () => {
    const r = bench('--sizes', '3m', '--no-torch');
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /unknown size "3m".*1m, 10m, 124m/);
  });
});
