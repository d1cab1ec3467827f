/**
 * The rollout backend seam: the local sampler is today's in-process sampling; with the openai
 * backend an agent loads its adapter on the servers, re-scores their tokens with its own engine,
 * weights the policy gradient by truncated importance sampling and reports |Δ log p|; config
 * refuses the openai backend without LoRA.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { completionLogprobs } from '../../src/model/logprobs.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { LossSample } from '../../src/rl/agent.js';
import { LocalAgent } from '../../src/rl/agent-pool.js';
import { ConfigError, RolloutSchema, resolveConfig } from '../../src/rl/config.js';
import { TisStats, tisWeights } from '../../src/rl/off-policy.js';
import { LocalSampler } from '../../src/rl/sampler.js';
import { agentSpec } from '../helpers/agent-spec.js';
import { makeTinyModel } from '../helpers/tiny-model.js';
import { FakeServer, vllmCompletion } from '../rollout/fake-server.js';

let dir = '';
let adapters = '';
before(() => {
  dir = makeTinyModel({ seed: 7 });
  adapters = mkdtempSync(join(tmpdir(), 'magrpo-sampler-test-'));
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(adapters, { recursive: true, force: true });
});
const servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

const params = { maxNewTokens: 4, stopStrings: [] as string[], temperature: 1, topK: null, topP: 1 };

describe('LocalSampler', () => {
  it("is today's in-process sampling: same batch, same RNG draws, same completions", async () => {
    const lm = LanguageModel.load(dir);
    const requests = [
      { prompt: 'go a', n: 2 },
      { prompt: 'go b c', n: 3 },
    ];
    const direct = lm.sample(
      requests.flatMap((r) => new Array<string>(r.n).fill(r.prompt)),
      { ...params, rng: new Rng(11) },
    );
    const out = await new LocalSampler(lm, new Rng(11)).generate(requests, params);
    assert.deepEqual(
      out.flatMap((o) => o.completions.map((c) => c.ids)),
      direct.map((d) => d.completionIds),
    );
    assert.deepEqual(
      out.flatMap((o) => o.completions.map((c) => c.logprobs)),
      direct.map((d) => d.logprobs),
    );
    assert.deepEqual(out[1].promptIds, direct[2].promptIds);
  });
});

describe('truncated importance sampling', () => {
  it('weights each token by min(exp(old − sampler), C), 1 where the sampler gave nothing', () => {
    const stats = new TisStats();
    const old = [[-1, -2], [-0.5], [-3]];
    const sampler = [[-1.5, -1], [], [-3.25]];
    const w = tisWeights(sampler, old, Int32Array.from([0, 0, 1, 2]), 2, stats) as Float64Array;
    assert.deepEqual([...w], [Math.min(Math.exp(0.5), 2), Math.exp(-1), 1, Math.exp(0.25)]);
    const m = stats.take();
    assert.equal(m.rollout_logprob_diff_mean, (0.5 + 1 + 0.25) / 3);
    assert.equal(m.rollout_logprob_diff_max, 1);
    assert.equal(m.rollout_tis_clip_frac, 0);
    assert.deepEqual(stats.take(), {}, 'reset after take');
    const capped = tisWeights([[-5]], [[-1]], Int32Array.from([0]), 2, stats) as Float64Array;
    assert.equal(capped[0], 2);
    assert.equal(stats.take().rollout_tis_clip_frac, 1);
    assert.equal(tisWeights(undefined, old, Int32Array.from([0]), 2, stats), null, 'local sampling: nothing to weight');
    assert.deepEqual([...(tisWeights([[-5]], [[-1]], Int32Array.from([0]), null, stats) as Float64Array)], [1], 'tis_cap null: measured, not weighted');
  });
});

describe('rollout config', () => {
  it('refuses the openai backend without LoRA or without servers, naming the fields', () => {
    assert.throws(
      () => resolveConfig({ rollout: { backend: 'openai', servers: ['http://127.0.0.1:8000'] } }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /rollout\.backend: rollout\.backend "openai" needs lora .*full fine-tuning \(lora: null\) would need a server restart per step and is not supported/.test(
          e.message,
        ),
    );
    assert.throws(
      () => resolveConfig({ lora: { r: 2, alpha: 4, target_modules: ['q_proj'] }, rollout: { backend: 'openai' } }),
      /rollout\.servers: rollout\.backend "openai" needs at least one server URL/,
    );
    assert.throws(() => resolveConfig({ rollout: { servers: ['localhost:8000'] } }), /rollout\.servers\.0: a base URL such as http:\/\/127\.0\.0\.1:8000/);
    const c = resolveConfig({});
    assert.equal(c.rollout.backend, 'local');
    assert.equal(c.rollout.tis_cap, 2);
  });
});

describe('agent with the openai backend', () => {
  it('loads its adapter, re-scores server tokens, reports |Δ log p| and hot-loads the next version after the update', async () => {
    const serverLp = [-0.5, -1.25, -2];
    const s = await new FakeServer((r) => {
      if (r.path === '/v1/load_lora_adapter') return { body: `Success: LoRA adapter '${r.body.lora_name}' added successfully.` };
      if (r.path === '/v1/unload_lora_adapter') return { body: `Success: LoRA adapter '${r.body.lora_name}' removed successfully.` };
      return {
        body: vllmCompletion(String(r.body.model), [
          { ids: [2, 3, 0], logprobs: serverLp, text: 'a b', finish: 'stop' },
          { ids: [4], logprobs: [-0.75], text: 'c' },
        ]),
      };
    }).start();
    servers.push(s);
    const spec = agentSpec(dir, {
      index: 1,
      lr: 1e-2,
      lora: { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj'] },
      rollout: { ...RolloutSchema.parse({ backend: 'openai', servers: [s.url], backoff_s: 0.01 }), adapterDir: adapters },
    });
    const agent = new LocalAgent(spec);
    const [g] = await agent.sample([{ prompt: 'go', n: 2 }], params);
    const load0 = s.seen[0];
    assert.equal(load0.path, '/v1/load_lora_adapter');
    assert.equal(load0.body.lora_name, 'agent_1-v0');
    assert.ok(existsSync(join(String(load0.body.lora_path), 'adapter_model.safetensors')), 'PEFT adapter written before loading');
    assert.equal(s.seen[1].body.model, 'agent_1-v0');

    const learner = noGrad(() => completionLogprobs(agent.agent.lm.model, [{ prompt: g.promptIds, completion: [2, 3, 0] }])).tokenLogprobs.data;
    assert.deepEqual(g.completions[0].logprobs, [...learner], 'loss uses learner log-probs');
    assert.deepEqual(g.completions[0].samplerLogprobs, serverLp, "the server's are kept");

    const loss: LossSample = {
      promptIds: g.promptIds,
      completions: g.completions.map((c) => c.ids),
      advantages: [1, -1],
      oldLogprobs: g.completions.map((c) => c.logprobs),
      samplerLogprobs: g.completions.map((c) => c.samplerLogprobs ?? []),
    };
    const stats = await agent.update([[loss]]);
    const diffs = [...[...learner].map((x, k) => Math.abs(x - serverLp[k])), Math.abs(g.completions[1].logprobs[0] + 0.75)];
    const r = stats.rollout as Record<string, number>;
    assert.ok(Math.abs(r.rollout_logprob_diff_mean - diffs.reduce((a, b) => a + b, 0) / diffs.length) < 1e-6);
    assert.ok(Math.abs(r.rollout_logprob_diff_max - Math.max(...diffs)) < 1e-6);
    assert.equal(r.rollout_servers, 1);
    assert.deepEqual(
      s.seen.slice(2).map((q) => `${q.path} ${q.body.lora_name}`),
      ['/v1/load_lora_adapter agent_1-v1', '/v1/unload_lora_adapter agent_1-v0'],
      'after the optimizer step the new version is loaded, then the old one unloaded',
    );
    await agent.close();
  });
});
