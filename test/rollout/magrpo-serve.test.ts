/**
 * Rollouts on real `magrpo serve` processes (issue #16, item 7): two servers on loopback, and
 * models/micro trained on the example task (configs/custom) with rollout.backend openai over both.
 * Checked: the openai backend reproduces the local backend with rollout.seed_per_request token for
 * token (sampler and whole run), adapters agent_<i>-v<step> reach both servers after every step (an
 * adapter of that name left on the servers is replaced), metrics rows are the local backend's
 * plus the off-policy metrics, and a server killed with SIGKILL mid-run is taken out while the
 * run finishes on the other.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { applyLora, saveLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { TrainerCallback } from '../../src/rl/callbacks.js';
import { resolveConfig } from '../../src/rl/config.js';
import { createSampler, LocalSampler, rolloutSpec, type SampledPrompt, type SamplingParams } from '../../src/rl/sampler.js';
import { OpenAISampler, requestSeeds } from '../../src/rollout/openai.js';
import { type RunReport, trainRun } from '../../src/run/train.js';
import { readJsonLines, withStderr } from '../helpers/capture-stderr.js';
import { SMALL_RUN, SMALL_RUN_ITEMS, SMALL_RUN_LORA } from '../helpers/small-run.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const CONFIG = join(ROOT, 'configs', 'custom', 'config.yaml');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-serve-rollout-'));

interface Served {
  child: ChildProcess;
  url: string;
  stderr: () => string;
}
const children: ChildProcess[] = [];
let servers: Served[] = [];

/** `magrpo serve --model models/micro --port 0` as its own process; resolves with its URL from stderr. */
function startServe(): Promise<Served> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), 'serve', '--model', MICRO, '--port', '0'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let err = '';
  return new Promise((resolve, reject) => {
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /serve: (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(err);
      if (m) resolve({ child, url: m[1], stderr: () => err });
    });
    child.on('exit', (code, signal) => reject(new Error(`magrpo serve exited (${code ?? signal}): ${err}`)));
  });
}

/** Adapter names a server lists in GET /v1/models (everything but the base model). */
async function adaptersOn(url: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/models`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { data: { id: string; parent: string | null }[] };
  return body.data
    .filter((m) => m.parent !== null)
    .map((m) => m.id)
    .sort();
}

/** Unloads every adapter from the servers still running (what earlier tests left). */
async function clearAdapters(): Promise<void> {
  for (const s of servers.filter((x) => x.child.exitCode === null && x.child.signalCode === null))
    for (const name of await adaptersOn(s.url)) {
      const res = await fetch(`${s.url}/v1/unload_lora_adapter`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ lora_name: name }) });
      assert.equal(res.status, 200, await res.text());
    }
}
const JSON_HEADERS = { 'content-type': 'application/json' };

/** configs/custom, small, with an update (and adapter) per item. */
const SMALL = [...SMALL_RUN, SMALL_RUN_LORA];
const ITEMS = SMALL_RUN_ITEMS;

/** Trains configs/custom into <tmp>/<name>; returns the report, metrics rows, samples and stderr (where the pool logs). */
async function train(
  name: string,
  set: string[],
  callbacks: TrainerCallback[] = [],
): Promise<{ report: RunReport; metrics: Record<string, number>[]; samples: Sample[]; log: string }> {
  const { value: report, log } = await withStderr(() =>
    trainRun(CONFIG, { quiet: true, set: [...SMALL, `output_dir=${tmp}`, `run_name=${name}`, ...set], callbacks }),
  );
  return {
    report,
    metrics: readJsonLines(join(report.dir, 'metrics.jsonl')),
    samples: readJsonLines<Sample>(join(report.dir, 'samples.jsonl')),
    log,
  };
}

interface Sample {
  item: number;
  tree: { completions: string[][]; completion_ids: number[][][]; logprobs: number[][][] };
}

const openai = (urls: string[]) => `trainer.rollout={backend: openai, servers: [${urls.join(', ')}], backoff_s: 0.01, max_backoff_s: 0.05}`;

/** The off-policy metrics the openai backend adds per agent (docs/metrics.md) when the server returns token ids. */
const OFF_POLICY = [
  'rollout_servers',
  'rollout_retokenized_frac',
  'rollout_missing_logprobs_frac',
  'rollout_logprob_diff_mean',
  'rollout_logprob_diff_max',
  'rollout_tis_weight_mean',
  'rollout_tis_clip_frac',
];

function assertCloseLogprobs(a: readonly number[], b: readonly number[], what: string, tol = 1e-5): void {
  assert.equal(a.length, b.length, `${what}: as many log-probs`);
  for (const [t, x] of a.entries()) assert.ok(Math.abs(x - b[t]) <= tol, `${what}, token ${t}: ${x} vs ${b[t]}`);
}

describe('rollout.seed_per_request (local backend)', () => {
  it("samples each prompt's group as lm.sample of that group alone with Rng(seed), the seeds drawn as the openai client draws them", async () => {
    const lm = LanguageModel.load(MICRO);
    const requests = [
      { prompt: 'def add(a, b):', n: 3 },
      { prompt: 'x', n: 2 },
    ];
    const params: SamplingParams = { maxNewTokens: 10, stopStrings: ['\n'], temperature: 1, topK: 30, topP: 0.95 };
    const spec = rolloutSpec(resolveConfig({ rollout: { seed_per_request: true } }));
    assert.equal(spec?.backend, 'local');
    assert.equal(spec?.adapterDir, null, 'no adapter folder for the local backend');
    assert.equal(rolloutSpec(resolveConfig({})), undefined, 'the default local backend is unchanged');
    const agentRng = new Rng(9);
    const sampler = createSampler(spec, lm, agentRng);
    assert.ok(sampler instanceof LocalSampler);
    const out = await sampler.generate(requests, params);
    const seeds = requestSeeds(new Rng(9), requests.length);
    for (const [k, r] of requests.entries()) {
      const alone = lm.sample(Array(r.n).fill(r.prompt), { ...params, rng: seeds[k] });
      assert.deepEqual(
        out[k].completions.map((c) => c.ids),
        alone.map((a) => a.completionIds),
      );
      for (const [j, c] of out[k].completions.entries()) assertCloseLogprobs(c.logprobs, alone[j].logprobs, `prompt ${k}, completion ${j}`);
    }
    // The agent's RNG gave one draw per request (the seeds) and nothing else, as OpenAISampler.generate.
    const expected = new Rng(9);
    requestSeeds(expected, requests.length);
    assert.equal(agentRng.next(), expected.next());
  });
});

describe('rollouts on two real magrpo serve processes', { timeout: 240_000 }, () => {
  before(async () => {
    servers = await Promise.all([startServe(), startServe()]);
  });
  after(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });

  it('with per-request seeds the openai backend reproduces the local backend token for token (ids, text, log-probs within 1e-5)', async () => {
    const lm = LanguageModel.load(MICRO);
    applyLora(lm.model, { r: 4, alpha: 8, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] }, new Rng(5));
    // A nonzero B, so the adapter changes the distribution and the servers must really apply it.
    const fill = new Rng(6);
    for (const a of lm.model.lora.values()) for (let i = 0; i < a.B.size; i++) a.B.data[i] = (fill.next() * 2 - 1) * 0.5;
    const logs: string[] = [];
    const remote = new OpenAISampler(
      lm,
      new Rng(42),
      {
        servers: servers.map((s) => s.url),
        apiKey: null,
        apiKeyEnv: null,
        timeoutMs: 60_000,
        maxConcurrency: 16,
        maxRetries: 2,
        backoffMs: 10,
        maxBackoffMs: 50,
        maxFailures: 3,
        maxResponseBytes: 2 ** 24,
        balance: 'least_busy',
        promptFormat: 'token_ids',
        adapterDir: join(tmp, 'sampler-adapters'),
        deleteOldAdapters: true,
      },
      (m) => logs.push(m),
    );
    await remote.loadWeights('tokens-v0', (dir) => saveLora(lm.model, dir, MICRO));
    for (const s of servers) assert.deepEqual(await adaptersOn(s.url), ['tokens-v0']);
    const local = new LocalSampler(lm, new Rng(42), true);
    const requests = [
      { prompt: 'def add(a, b):', n: 3 },
      { prompt: 'Write the first half of a sentence about the sea:', n: 2 },
      { prompt: 'x', n: 4 },
    ];
    const settings: SamplingParams[] = [
      { maxNewTokens: 12, stopStrings: [], temperature: 0.9, topK: null, topP: 0.95 },
      { maxNewTokens: 10, stopStrings: ['\n', ' the'], temperature: 1.2, topK: 40, topP: 1 },
      { maxNewTokens: 8, stopStrings: [], temperature: 1, topK: null, topP: 1 },
    ];
    const all: { local: SampledPrompt[]; remote: SampledPrompt[] }[] = [];
    // Consecutive calls: both samplers draw their seeds from their own Rng(42) and stay in step.
    for (const params of settings) all.push({ local: await local.generate(requests, params), remote: await remote.generate(requests, params) });
    for (const [call, { local: l, remote: r }] of all.entries()) {
      for (const [k, req] of requests.entries()) {
        assert.deepEqual(r[k].promptIds, l[k].promptIds);
        assert.equal(r[k].completions.length, req.n);
        for (const [j, c] of r[k].completions.entries()) {
          const want = l[k].completions[j];
          const what = `call ${call}, prompt ${k}, completion ${j}`;
          assert.deepEqual(c.ids, want.ids, what);
          assert.equal(c.text, want.text, what);
          assertCloseLogprobs(c.logprobs, want.logprobs, what);
        }
      }
    }
    const ids = (out: SampledPrompt[]) => out.map((o) => o.completions.map((c) => c.ids));
    // Sanity: completions of one prompt differ (sampling happened) and the stop strings cut some.
    assert.ok(new Set(ids(all[0].local)[0].map((x) => x.join())).size > 1);
    assert.notDeepEqual(
      ids(await new LocalSampler(lm, new Rng(42)).generate(requests, settings[0])),
      ids(all[0].local),
      'one RNG for the batch samples other tokens',
    );
    const saved = new Map(lm.model.lora);
    lm.model.lora.clear();
    const base = ids(await new LocalSampler(lm, new Rng(42), true).generate(requests, settings[0]));
    for (const [k, v] of saved) lm.model.lora.set(k, v);
    assert.notDeepEqual(base, ids(all[0].remote), 'the servers sampled with the adapter, not the base model');
    assert.deepEqual(logs, []);
  });

  it('training on both servers: same completions as the local backend with seed_per_request, adapters on both after every step, metrics = local keys + off-policy keys', async () => {
    await clearAdapters();
    // A stale adapter under a name the run will use (as an earlier run leaves its last version loaded):
    // the run must replace it, or item 2 of agent 1 would sample other weights than the local run.
    const stale = LanguageModel.load(MICRO);
    applyLora(stale.model, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] }, new Rng(1));
    for (const a of stale.model.lora.values()) a.B.data.fill(0.7);
    const staleDir = join(tmp, 'stale-adapter');
    saveLora(stale.model, staleDir, MICRO);
    for (const s of servers) {
      const res = await fetch(`${s.url}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({ lora_name: 'agent_1-v1', lora_path: staleDir }),
      });
      assert.equal(res.status, 200, await res.text());
    }

    const local = await train('local', ['trainer.rollout.seed_per_request=true']);
    const seen: { items: number; adapters: string[][] }[] = [];
    const remote = await train(
      'openai',
      [openai(servers.map((s) => s.url))],
      [
        {
          onStepEnd: async ({ items }) => {
            seen.push({ items, adapters: await Promise.all(servers.map((s) => adaptersOn(s.url))) });
          },
        },
      ],
    );
    assert.equal(local.report.status, 'finished');
    assert.equal(remote.report.status, 'finished', remote.log);

    // After item k each agent has made k updates and both servers hold exactly its version k.
    assert.equal(seen.length, ITEMS);
    for (const { items, adapters } of seen) for (const a of adapters) assert.deepEqual(a, [`agent_0-v${items}`, `agent_1-v${items}`], `after item ${items}`);
    assert.match(remote.log, /an adapter named agent_1-v1 was already loaded/);

    // Token for token: every item's rollout tree has the local run's completions (the openai run's
    // log-probs are the learner's re-scoring, equal to the local sampler's up to rounding).
    assert.equal(remote.samples.length, ITEMS);
    for (const [i, s] of remote.samples.entries()) {
      const l = local.samples[i].tree;
      assert.deepEqual(s.tree.completion_ids, l.completion_ids, `item ${s.item}`);
      assert.deepEqual(s.tree.completions, l.completions, `item ${s.item}`);
      for (const [a, per] of s.tree.logprobs.entries())
        for (const [j, lp] of per.entries()) assertCloseLogprobs(lp, l.logprobs[a][j], `item ${s.item}, agent ${a}, completion ${j}`);
    }

    // Metrics: the rows the local backend writes (same steps, same keys) plus the off-policy metrics.
    assert.equal(remote.metrics.length, local.metrics.length);
    assert.ok(remote.metrics.length >= ITEMS);
    for (const [i, row] of remote.metrics.entries()) {
      const want = [...Object.keys(local.metrics[i]), ...[0, 1].flatMap((a) => OFF_POLICY.map((m) => `agent_${a}/${m}`))].sort();
      assert.deepEqual(Object.keys(row).sort(), want, `row ${i}`);
      assert.equal(row.step, local.metrics[i].step);
      for (const a of [0, 1]) {
        assert.equal(row[`agent_${a}/rollout_servers`], 2);
        assert.equal(row[`agent_${a}/rollout_retokenized_frac`], 0);
        assert.equal(row[`agent_${a}/rollout_missing_logprobs_frac`], 0);
        assert.ok(row[`agent_${a}/rollout_logprob_diff_max`] < 1e-4, `row ${i}: server and learner log-probs agree`);
        assert.ok(Math.abs(row[`agent_${a}/rollout_tis_weight_mean`] - 1) < 1e-4);
      }
    }
  });

  it('SIGKILL of one server mid-run: the pool logs it as taken out and the run finishes on the other', async () => {
    await clearAdapters();
    const [keep, victim] = servers;
    const counts: number[] = [];
    const run = await train(
      'killed',
      [openai(servers.map((s) => s.url))],
      [
        {
          onStepEnd: async ({ items }) => {
            if (items === 1) {
              assert.deepEqual(await adaptersOn(victim.url), ['agent_0-v1', 'agent_1-v1']);
              const gone = new Promise((resolve) => victim.child.once('exit', resolve));
              victim.child.kill('SIGKILL');
              await gone;
            } else {
              assert.deepEqual(await adaptersOn(keep.url), [`agent_0-v${items}`, `agent_1-v${items}`], `after item ${items}`);
              await assert.rejects(fetch(`${victim.url}/v1/models`));
            }
            counts.push(items);
          },
        },
      ],
    );
    assert.equal(victim.child.signalCode, 'SIGKILL');
    assert.equal(run.report.status, 'finished', run.log);
    assert.deepEqual(counts, [1, 2, 3, 4]);
    const port = victim.url.split(':').pop();
    assert.match(run.log, new RegExp(`rollout server http://127\\.0\\.0\\.1:${port} taken out after \\d+ failure\\(s\\) in a row .*1 left: ${keep.url}`));
    // Rows of items sampled after the kill count one server.
    const servedBy = run.metrics.map((m) => m['agent_0/rollout_servers']);
    assert.equal(servedBy[0], 2);
    assert.equal(servedBy[servedBy.length - 1], 1);
    assert.equal(run.samples.length, ITEMS);
  });
});
