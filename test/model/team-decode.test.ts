/**
 * Agents that share one base model sample in one batch, each row under its own agent's LoRA
 * adapters (model/sample.ts `rowAdapters`, LanguageModel.sampleTogether): the tokens of each agent
 * sampling alone with the same random state, and log-probs within float rounding, on both
 * backends, through the fused Llama decode step and the layer-by-layer forward (GPT-2); a prompt
 * two agents share is prefilled once per agent, not once for both.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { setBackend } from '../../src/engine/runtime.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { setFusedDecode } from '../../src/model/llama.js';
import { decodeStepCount } from '../../src/model/llama-decode.js';
import { createModel } from '../../src/model/load.js';
import { applyLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { generate } from '../../src/model/sample.js';
import type { TextTokenizer } from '../../src/model/tokenizer.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { TINY_LLAMA_CONFIG } from '../helpers/tiny-model.js';

const llama = TINY_LLAMA_CONFIG;
const gpt2 = { model_type: 'gpt2', vocab_size: 96, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64 };
const TARGETS = { llama: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], gpt2: ['c_attn', 'c_proj', 'c_fc'] };

/** A frozen base and two agents reading it, each with adapters whose B is random (PEFT starts it at zero). */
function team(hf: Record<string, unknown>, targets: string[]) {
  const base = createModel(parseModelConfig(hf));
  const rng = new Rng(3);
  base.initialize(rng);
  for (const p of base.params.values()) p.requiresGrad = false;
  const agents = [0, 1].map((i) => {
    const m = base.sharedBase();
    applyLora(m, { r: 2 + i, alpha: 4, targetModules: targets }, new Rng(10 + i));
    for (const ad of m.lora.values()) for (let j = 0; j < ad.B.size; j++) ad.B.data[j] = rng.normal() * 0.5;
    return m;
  });
  const prompt = () => Array.from({ length: 3 + Math.floor(rng.next() * 4) }, () => Math.floor(rng.next() * 96));
  const shared = prompt();
  // Four rows per agent (the packs' and the fused step's minimum), one prompt in both agents' lists.
  const prompts = agents.map(() => [shared, prompt(), prompt(), prompt()]);
  return { base, agents, prompts };
}

function close(a: number[][], b: number[][], tol: number, label: string): void {
  for (const [i, row] of b.entries())
    for (const [t, x] of row.entries()) assert.ok(Math.abs(a[i][t] - x) < tol, `${label} row ${i} token ${t}: ${a[i][t]} vs ${x}`);
}

for (const name of ['native', 'reference'] as const) {
  describe(`agents on one base sample in one batch (${name} backend)`, () => {
    after(() => {
      setFusedDecode(true);
      setBackend('native');
    });
    for (const [arch, hf] of [
      ['llama', llama],
      ['gpt2', gpt2],
    ] as const) {
      for (const fused of arch === 'llama' ? [true, false] : [false]) {
        for (const temperature of [0, 1]) {
          it(`${arch}${arch === 'llama' ? (fused ? ', fused decode' : ', layer by layer') : ''}, temperature ${temperature}: each agent's tokens alone, log-probs within 1e-4`, () => {
            setBackend(name);
            setFusedDecode(fused);
            const { base, agents, prompts } = team(hf, TARGETS[arch]);
            const opts = { maxNewTokens: 10, temperature };
            const alone = agents.map((m, i) => generate(m, prompts[i], { ...opts, rng: new Rng(20 + i) }));
            const before = decodeStepCount.calls;
            const rngs = [new Rng(20), new Rng(21)];
            const both = generate(base, prompts.flat(), {
              ...opts,
              rowRngs: prompts.flatMap((ps, i) => ps.map(() => rngs[i])),
              rowAdapters: prompts.flatMap((ps, i) => ps.map(() => agents[i].lora)),
            });
            if (fused) assert.ok(decodeStepCount.calls - before > 0, 'the together batch took the fused step');
            for (const [i, a] of alone.entries()) {
              const rows = both.tokens.slice(4 * i, 4 * i + 4);
              assert.deepEqual(rows, a.tokens, `agent ${i}'s tokens`);
              close(both.logprobs.slice(4 * i, 4 * i + 4), a.logprobs, 1e-4, `agent ${i}`);
            }
            // The adapters matter: the same prompt gives the two agents different log-probs.
            assert.notDeepEqual(alone[0].logprobs[0], alone[1].logprobs[0]);
          });
        }
      }
    }
  });
}

describe('LanguageModel.sampleTogether', () => {
  const lms = () => {
    const { agents } = team(llama, TARGETS.llama);
    const tokenizer = {
      promptIds: (p: string) => [...p].map((c) => c.charCodeAt(0) % 90),
      decode: (ids: number[]) => ids.join(' '),
      eosIds: [95],
      chatEndId: null,
      bosId: null,
    } as unknown as TextTokenizer;
    return { agents, tokenizer, lm: (m: CausalLM) => new LanguageModel(m, tokenizer) };
  };

  it("answers per member, each as the member's own sample would", () => {
    const { agents, lm } = lms();
    const prompts = [
      ['ab', 'cd', 'ef', 'gh'],
      ['ab', 'xy', 'zz', 'q'],
    ];
    const opts = { maxNewTokens: 6, temperature: 1 };
    const alone = agents.map((m, i) => lm(m).sample(prompts[i], { ...opts, rng: new Rng(5 + i) }));
    const together = LanguageModel.sampleTogether(
      agents.map((m, i) => ({ lm: lm(m), prompts: prompts[i], rng: new Rng(5 + i) })),
      opts,
    );
    assert.equal(together.length, 2);
    for (const [i, a] of alone.entries()) {
      assert.deepEqual(
        together[i].map((s) => s.completionIds),
        a.map((s) => s.completionIds),
      );
      assert.deepEqual(
        together[i].map((s) => s.text),
        a.map((s) => s.text),
      );
    }
  });

  it('refuses members on another base model, or with a tokenizer of their own', () => {
    const { agents, lm, tokenizer } = lms();
    const other = team(llama, TARGETS.llama).agents[0];
    const member = (m: CausalLM, t = tokenizer) => ({ lm: new LanguageModel(m, t), prompts: ['ab'], rng: new Rng(1) });
    assert.throws(() => LanguageModel.sampleTogether([member(agents[0]), member(other)], { maxNewTokens: 2 }), /member 1 does not share member 0's base model/);
    const copy = { ...tokenizer } as TextTokenizer;
    assert.throws(() => LanguageModel.sampleTogether([member(agents[0]), member(agents[1], copy)], { maxNewTokens: 2 }), /member 1 has a tokenizer of its own/);
    assert.equal(lm(agents[0]).model.sharesBaseWith(agents[1]), true);
    assert.equal(agents[0].sharesBaseWith(other), false);
  });
});
