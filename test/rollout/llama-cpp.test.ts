/**
 * Rollouts on llama.cpp's OpenAI-compatible server (llama-cpp-python's `python -m
 * llama_cpp.server`; issue #16, item 6). models/micro is exported with `magrpo export --format
 * gguf` (tokenizer included) and served by llama.cpp; checked here:
 *
 * - llama.cpp reads the file as magrpo's model: same prompt tokens, the same greedy completion
 *   (temperature 0) token for token, and log-probs within float error of magrpo's;
 * - configs/custom trains with rollout.backend openai against it. llama.cpp returns text and
 *   per-token strings but no token ids, so the client's re-tokenising fallback runs for real: its
 *   warning is logged and agent_i/rollout_retokenize_mismatch_frac is in every update's row;
 * - llama.cpp cannot load adapters at runtime: the default rollout.weight_sync lora stops at the
 *   first adapter load with a message naming rollout.weight_sync none, the mode in which the
 *   server keeps its starting model (off-policy, TIS) and full fine-tuning trains; token-id prompts,
 *   which llama.cpp refuses, are answered with a message naming rollout.prompt_format text.
 *
 * Everything that needs llama.cpp is skipped, with the reason printed, when the interpreter
 * (MAGRPO_LLAMA_PYTHON, else .cache/venv-llama or .cache/venv-learner, else python3) cannot import
 * llama_cpp and its server (`pip install 'llama-cpp-python[server]'`). Run with `nice -n 10`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { ConfigError, resolveConfig } from '../../src/rl/config.js';
import { OpenAISampler } from '../../src/rollout/openai.js';
import { type RunReport, trainRun } from '../../src/run/train.js';
import { readJsonLines, withStderr } from '../helpers/capture-stderr.js';
import { optionalSkip } from '../helpers/skip.js';
import { SMALL_RUN, SMALL_RUN_ITEMS, SMALL_RUN_LORA } from '../helpers/small-run.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const CONFIG = join(ROOT, 'configs', 'custom', 'config.yaml');
/** MAGRPO_LLAMA_PYTHON, else the venvs scripts/setup.sh makes (--with-llama, --with-learner), else python3. */
const PY =
  process.env.MAGRPO_LLAMA_PYTHON ??
  [join(ROOT, '.cache', 'venv-llama', 'bin', 'python'), join(ROOT, '.cache', 'venv-learner', 'bin', 'python')].find((p) => existsSync(p)) ??
  'python3';

/** Why llama.cpp's server cannot run here (null: it can), and its version. */
function llamaServer(): { problem: string | null; version: string } {
  const r = spawnSync(PY, ['-c', 'import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)'], { encoding: 'utf8', timeout: 60_000 });
  if (r.status === 0) return { problem: null, version: r.stdout.trim() };
  const last = `${r.stderr ?? ''}${r.error?.message ?? ''}`.trim().split('\n').at(-1) ?? '';
  return {
    problem: `${PY} cannot import llama_cpp and llama_cpp.server.app (${last || `exit ${r.status}`}); install with: pip install 'llama-cpp-python[server]'`,
    version: '',
  };
}
const llama = llamaServer();
const skip = optionalSkip('llama', llama.problem);
if (skip) console.log(`llama-cpp: skipping the llama.cpp server tests: ${skip}`);

/** llama.cpp's sampling defaults off, so it samples the distribution the trainer asks for (docs/scale.md). */
const LLAMA_NEUTRAL = { top_k: 0, min_p: 0, repeat_penalty: 1 };

const tmp = mkdtempSync(join(tmpdir(), 'magrpo-llama-cpp-'));
let server: ChildProcess | null = null;
let url = '';
let serverLog = '';

after(() => {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
});

/** A free TCP port on 127.0.0.1 (llama_cpp.server takes no port 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      s.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Exports models/micro with the CLI and starts llama.cpp's server on it; resolves once GET /v1/models answers. */
async function startLlamaServer(): Promise<void> {
  const gguf = join(tmp, 'micro.gguf');
  const exp = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), 'export', '--format', 'gguf', '--model', MICRO, '--out', gguf],
    {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  assert.equal(exp.status, 0, exp.stderr);
  assert.match(exp.stderr, /export: .*micro\.gguf \(GGUF v3, llama/);
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  // One thread (the machine is shared), a context as long as the model's.
  const child = spawn(PY, ['-m', 'llama_cpp.server', '--model', gguf, '--host', '127.0.0.1', '--port', String(port), '--n_ctx', '256', '--n_threads', '1'], {
    cwd: tmp,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server = child;
  child.stdout?.on('data', (d: Buffer) => {
    serverLog += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    serverLog += d.toString();
  });
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama_cpp.server exited (${child.exitCode ?? child.signalCode}):\n${serverLog}`);
    const ok = await fetch(`${url}/v1/models`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`llama_cpp.server did not answer within 90 s:\n${serverLog}`);
}

interface LlamaChoice {
  text: string;
  finish_reason: string;
  logprobs: { tokens: string[]; token_logprobs: number[] };
}

async function complete(body: Record<string, unknown>): Promise<LlamaChoice> {
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return (JSON.parse(text) as { choices: LlamaChoice[] }).choices[0];
}

const SMALL = SMALL_RUN;
const ITEMS = SMALL_RUN_ITEMS;
const LORA = SMALL_RUN_LORA;

/** trainer.rollout for the llama.cpp server: text prompts, its sampling defaults off, quick retries. */
function rollout(fields: Record<string, unknown>): string {
  const all = { backend: 'openai', servers: [url], prompt_format: 'text', extra_body: LLAMA_NEUTRAL, backoff_s: 0.01, max_backoff_s: 0.05, ...fields };
  return `trainer.rollout=${JSON.stringify(all)}`;
}

/** Trains configs/custom into <tmp>/<name>, keeping what is written to stderr (where the client logs). */
async function train(name: string, set: string[]): Promise<{ report: RunReport; metrics: Record<string, number>[]; log: string }> {
  const { value: report, log } = await withStderr(() => trainRun(CONFIG, { quiet: true, set: [...SMALL, `output_dir=${tmp}`, `run_name=${name}`, ...set] }));
  return { report, metrics: readJsonLines(join(report.dir, 'metrics.jsonl')), log };
}

/** Same as `train`, for a run expected to fail: its error. */
async function trainError(name: string, set: string[]): Promise<Error> {
  const write = process.stderr.write;
  process.stderr.write = (() => true) as typeof write;
  try {
    await trainRun(CONFIG, { quiet: true, set: [...SMALL, `output_dir=${tmp}`, `run_name=${name}`, ...set] });
  } catch (e) {
    return e as Error;
  } finally {
    process.stderr.write = write;
  }
  throw new Error(`run ${name} finished, expected an error`);
}

describe('rollout.weight_sync and the config', () => {
  const servers = ['http://127.0.0.1:8000'];
  it('openai with full fine-tuning is refused unless weight_sync is none, and the message says so', () => {
    assert.throws(
      () => resolveConfig({ rollout: { backend: 'openai', servers } }),
      (e: unknown) => e instanceof ConfigError && /needs lora/.test(e.message) && /rollout\.weight_sync: none/.test(e.message),
    );
    const c = resolveConfig({ rollout: { backend: 'openai', servers, weight_sync: 'none' } });
    assert.equal(c.lora, null);
    assert.equal(c.rollout.weight_sync, 'none');
    assert.deepEqual(c.rollout.extra_body, {});
  });

  it('weight_sync none needs the TIS correction', () => {
    assert.throws(
      () => resolveConfig({ rollout: { backend: 'openai', servers, weight_sync: 'none', tis_cap: null } }),
      (e: unknown) => e instanceof ConfigError && /rollout\.tis_cap/.test(e.message) && /off-policy/.test(e.message),
    );
  });
});

describe("llama.cpp's server (llama-cpp-python) on the exported models/micro", { skip }, () => {
  before(startLlamaServer, { timeout: 120_000 });

  it('generates the same greedy tokens as magrpo for short prompts, with the same log-probs', async () => {
    const lm = LanguageModel.load(MICRO);
    const report: string[] = [];
    for (const prompt of ['def add(a, b):', 'The whale']) {
      const [mine] = lm.sample([prompt], { maxNewTokens: 16, temperature: 0 });
      const theirs = await complete({ prompt, max_tokens: 16, temperature: 0, logprobs: 1, ...LLAMA_NEUTRAL });
      const myTokens = mine.completionIds.map((id) => lm.tokenizer.decode([id]));
      let same = 0;
      while (same < myTokens.length && myTokens[same] === theirs.logprobs.tokens[same]) same++;
      const gap = Math.max(...theirs.logprobs.token_logprobs.slice(0, same).map((x, k) => Math.abs(x - mine.logprobs[k])));
      report.push(`${JSON.stringify(prompt)}: ${same} of ${myTokens.length} greedy tokens equal (max |Δ log p| ${gap.toExponential(1)})`);
      assert.deepEqual(theirs.logprobs.tokens, myTokens, `greedy completion of ${JSON.stringify(prompt)}`);
      assert.equal(theirs.text, mine.text);
      assert.ok(gap < 1e-3, `log-probs of ${JSON.stringify(prompt)}: llama.cpp ${theirs.logprobs.token_logprobs} vs magrpo ${mine.logprobs}`);
    }
    console.log(`llama-cpp ${llama.version}: ${report.join('; ')}`);
  });

  it('re-tokenises what llama.cpp sampled: a stop string it cuts from its text is kept as the local sampler keeps it, and the tokens line up', async () => {
    const lm = LanguageModel.load(MICRO);
    const logs: string[] = [];
    const sampler = new OpenAISampler(
      lm,
      new Rng(1),
      {
        servers: [url],
        apiKey: null,
        apiKeyEnv: null,
        timeoutMs: 60_000,
        maxConcurrency: 2,
        maxRetries: 0,
        backoffMs: 10,
        maxBackoffMs: 10,
        maxFailures: 3,
        maxResponseBytes: 1 << 20,
        balance: 'least_busy',
        promptFormat: 'text',
        adapterDir: join(tmp, 'adapters'),
        deleteOldAdapters: true,
        weightSync: 'none',
        extraBody: LLAMA_NEUTRAL,
      },
      (m) => logs.push(m),
    );
    await sampler.loadWeights('agent_0-v0', () => assert.fail('weight_sync none writes no adapter'));
    // Greedy: llama.cpp answers text "\n   " and tokens ["\n   ", ' """'] (the stop string is cut from the text only).
    const stop = [' """'];
    const [out] = await sampler.generate([{ prompt: 'def add(a, b):', n: 1 }], { maxNewTokens: 8, stopStrings: stop, temperature: 0, topK: null, topP: 1 });
    const [local] = lm.sample(['def add(a, b):'], { maxNewTokens: 8, temperature: 0, stopStrings: stop });
    assert.equal(local.finishReason, 'stop_string');
    assert.deepEqual(out.completions[0].ids, local.completionIds, 'the stop-string tokens, no EOS added');
    assert.equal(out.completions[0].text, local.text);
    assert.equal(out.completions[0].logprobs.length, local.completionIds.length, "llama.cpp's log-probs kept: the tokens lined up");
    assert.equal(sampler.takeStats().rollout_retokenize_mismatch_frac, 0);
    assert.ok(logs.some((m) => /re-tokenising its text locally/.test(m)));
  });

  it('trains configs/custom with full fine-tuning and rollout.weight_sync none: the re-tokenising fallback runs, with its warning and metric', async () => {
    const { report, metrics, log } = await train('full-ft-none', [rollout({ weight_sync: 'none' }), 'trainer.stop_strings=["."]']);
    assert.equal(report.status, 'finished');
    assert.equal(report.items, ITEMS);
    assert.match(log, /warning: http:\/\/127\.0\.0\.1:\d+ returns text without token ids .* re-tokenising its text locally/);
    assert.match(log, /rollout\.weight_sync none: the agent's updates are not sent to http:\/\/127\.0\.0\.1:\d+/);
    const updates = metrics.filter((m) => 'agent_0/rollout_servers' in m);
    assert.equal(updates.length, ITEMS, 'one update (and metrics row) per item');
    const mismatch: number[] = [];
    for (const m of updates)
      for (const a of [0, 1]) {
        const frac = m[`agent_${a}/rollout_retokenize_mismatch_frac`];
        assert.equal(typeof frac, 'number', `agent_${a}/rollout_retokenize_mismatch_frac in ${JSON.stringify(m)}`);
        assert.ok(frac >= 0 && frac <= 1, `mismatch fraction ${frac}`);
        assert.equal(m[`agent_${a}/rollout_retokenized_frac`], 1, 'every completion re-tokenised');
        mismatch.push(frac);
      }
    // Before the first update the server's model is the learner's: their log-probs agree.
    // Before the first update the server's model is the learner's: where tokens lined up, their log-probs agree.
    const diffs = [0, 1].map((a) => updates[0][`agent_${a}/rollout_logprob_diff_max`]).filter((x) => x !== undefined);
    for (const d of diffs) assert.ok(d < 1e-3, `first update: llama.cpp's log-probs vs the learner's, max |Δ| ${d}`);
    console.log(
      `llama-cpp: retokenize mismatch fraction per update and agent: ${mismatch.map((x) => x.toFixed(2)).join(' ')}; first update max |Δ log p|: ${diffs.map((d) => d.toExponential(1)).join(', ') || 'none lined up'}`,
    );
  });

  it('refuses the default weight_sync lora at the first adapter load, naming weight_sync none', async () => {
    const e = await trainError('lora-sync', [rollout({}), LORA]);
    assert.match(e.message, /v1\/load_lora_adapter: 404 .*does not load adapters at runtime/);
    assert.match(e.message, /rollout\.weight_sync: none/);
  });

  it('says to use prompt_format text when the server refuses token-id prompts', async () => {
    const e = await trainError('token-ids', [rollout({ weight_sync: 'none', prompt_format: 'token_ids', max_retries: 1 })]);
    assert.match(e.message, /valid string/);
    assert.match(e.message, /set rollout\.prompt_format: text/);
  });
});
