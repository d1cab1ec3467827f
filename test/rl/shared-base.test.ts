/**
 * LoRA agents of one thread on the same base model read one copy of its weights, and so does
 * each agent's reference (rl/agent.ts frozenBase, model/transformer.ts sharedBase): no agent's
 * update changes another's outputs, the reference stays the untrained model, and what would write
 * a shared weight refuses.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { noGrad } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { groupLogprobs, sequenceSums } from '../../src/model/logprobs.js';
import { applyLora, mergeLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { type LossSample, PolicyAgent } from '../../src/rl/agent.js';
import { LocalSampler, setTeamDecode } from '../../src/rl/sampler.js';
import { agentSpec } from '../helpers/agent-spec.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const lora = { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj', 'gate_proj', 'down_proj'] };
const prompt = [1, 2, 3];
const completions = [[4, 5], [6], [7, 8, 2]];
const score = (model: CausalLM) => sequenceSums(noGrad(() => groupLogprobs(model, prompt, completions)));

describe('agents sharing a frozen base model', () => {
  let dir: string;
  before(() => {
    setBackend('native');
    setDType('float32');
    dir = makeTinyModel({ hidden: 16, layers: 2, seed: 4 });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('read one copy of the weights, train their own adapters, and keep the untrained reference', async () => {
    const a = new PolicyAgent(agentSpec(dir, { index: 0, seed: 1, lora, lr: 0.05, trackReference: true }));
    const b = new PolicyAgent(agentSpec(dir, { index: 1, seed: 2, lora, lr: 0.05, trackReference: true }));
    for (const [name, p] of a.lm.model.params) assert.equal(b.lm.model.param(name), p, `${name} is one tensor`);
    assert.notEqual(a.lm.model.lora, b.lm.model.lora);
    const before = { a: score(a.lm.model), b: score(b.lm.model) };
    const sample: LossSample = { promptIds: prompt, completions, advantages: [1, -1, 0.5], oldLogprobs: completions.map(() => []) };
    await a.update([[sample]]);
    await a.update([[sample]]);
    assert.notDeepEqual(score(a.lm.model), before.a, "agent 0's update changed its own outputs");
    assert.deepEqual(score(b.lm.model), before.b, "agent 1's outputs are unchanged");
    // The reference is the untrained model: adapters start with B = 0 (PEFT), so it scores as b did before any update.
    const ref = (a as unknown as { ref: { model: CausalLM } }).ref.model;
    assert.equal(ref.param('model.embed_tokens.weight'), a.lm.model.param('model.embed_tokens.weight'));
    assert.equal(ref.lora.size, 0);
    assert.deepEqual(score(ref), before.b);
    const g = await a.sample([{ prompt: 'a b', n: 2 }], { maxNewTokens: 3, temperature: 1, topP: 1, topK: 0, stopStrings: [] });
    assert.ok(g[0].refNll !== undefined, 'the reference scored the samples');
    for (const p of a.lm.model.params.values()) assert.equal(p.requiresGrad, false);
  });

  it('sample in one batch (PolicyAgent.sampleEach): the samples of sampling one after another', async () => {
    const pair = async () => {
      const agents = [0, 1].map((i) => new PolicyAgent(agentSpec(dir, { index: i, seed: 1 + i, lora, lr: 0.05, trackReference: true })));
      // Different adapters: each agent steps on its own advantages.
      const sample = (sign: number): LossSample => ({ promptIds: prompt, completions, advantages: [sign, -sign, 0.5], oldLogprobs: completions.map(() => []) });
      for (const [i, a] of agents.entries()) await a.update([[sample(i === 0 ? 1 : -1)]]);
      return agents;
    };
    const requests = [
      [
        { prompt: 'a b', n: 2 },
        { prompt: 'c', n: 2 },
      ],
      [
        { prompt: 'a b', n: 2 },
        { prompt: 'd e f', n: 2 },
      ],
    ];
    const params = { maxNewTokens: 6, temperature: 1, topP: 1, topK: 0, stopStrings: [] };
    const batched = LanguageModel.sampleTogether;
    const run = async (together: boolean) => {
      setTeamDecode(together);
      let batches = 0;
      LanguageModel.sampleTogether = (...args) => {
        batches++;
        return batched(...args);
      };
      try {
        const groups = await PolicyAgent.sampleEach(await pair(), requests, params);
        return { groups, batches };
      } finally {
        LanguageModel.sampleTogether = batched;
        setTeamDecode(true);
      }
    };
    const [one, apart] = [await run(true), await run(false)];
    assert.deepEqual([one.batches, apart.batches], [1, 0], 'one batch for both agents; none when turned off');
    for (const [i, groups] of apart.groups.entries()) {
      for (const [k, g] of groups.entries()) {
        const h = one.groups[i][k];
        assert.deepEqual(
          h.completions.map((c) => c.ids),
          g.completions.map((c) => c.ids),
          `agent ${i} request ${k}`,
        );
        for (const [j, c] of g.completions.entries()) {
          for (const [t, lp] of c.logprobs.entries()) assert.ok(Math.abs(h.completions[j].logprobs[t] - lp) < 1e-4);
          assert.deepEqual(h.refLogprobs?.[j], g.refLogprobs?.[j], 'the reference scores the same tokens alike');
        }
      }
    }
    assert.notDeepEqual(one.groups[0][0].completions[0].logprobs, one.groups[1][0].completions[0].logprobs, 'each agent under its own adapters');
  });

  it('chat and plain prompts in one call sample apart (their stop tokens differ); all-chat ones together', () => {
    const chatDir = makeTinyModel({ hidden: 16, layers: 2, seed: 4, chat: true });
    try {
      const agents = [0, 1].map((i) => new PolicyAgent(agentSpec(chatDir, { index: i, seed: 1 + i, lora })));
      const samplers = agents.map((a) => a.sampler);
      const params = { maxNewTokens: 3, temperature: 1, topP: 1, topK: 0, stopStrings: [] };
      const chat = [{ prompt: [{ role: 'user' as const, content: 'a b' }], n: 2 }];
      const plain = [{ prompt: 'a b', n: 2 }];
      assert.equal(LocalSampler.generateTogether(samplers, [chat, plain], params), null);
      const both = LocalSampler.generateTogether(samplers, [chat, chat], params);
      assert.equal(both?.length, 2);
      assert.equal(both?.[1][0].completions.length, 2);
    } finally {
      rmSync(chatDir, { recursive: true, force: true });
    }
  });

  it('a model with trainable weights is not shared; a shared one refuses mergeLora', () => {
    const model = createModel(
      parseModelConfig({
        model_type: 'llama',
        vocab_size: 16,
        hidden_size: 8,
        intermediate_size: 16,
        num_hidden_layers: 1,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        max_position_embeddings: 16,
      }),
    );
    model.initialize(new Rng(1));
    assert.throws(() => model.sharedBase(), /trainable/);
    applyLora(model, { r: 2, alpha: 4, targetModules: ['q_proj'] }, new Rng(2));
    const twin = model.sharedBase();
    assert.equal(twin.lora.size, 0);
    assert.equal(model.lora.size, 1);
    assert.ok(model.sharesWeights && twin.sharesWeights);
    assert.throws(() => mergeLora(model), /shares its base weights/);
  });
});
