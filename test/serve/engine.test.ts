/**
 * BatchEngine's prefill (serve/engine.ts): a group's n rows, and groups with the same prompt, are
 * prefilled once; the completions are those of `LanguageModel.sample` prefilling every copy. And
 * the serving path decodes as `generate` does: same seed and prompt, same tokens.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { applyLora, saveLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { generate, setSharedPrefill } from '../../src/model/sample.js';
import { BatchEngine, type GroupRequest, type SamplingSpec, type TokenEvent } from '../../src/serve/engine.js';
import { describeEachBackend } from '../helpers/backends.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const dir = makeTinyModel({ hidden: 32, layers: 2, seed: 3 });
after(() => {
  setSharedPrefill(true);
  rmSync(dir, { recursive: true, force: true });
});

const spec = (seed: number): SamplingSpec => ({
  maxNewTokens: 8,
  temperature: 1,
  topP: 1,
  topK: null,
  stopStrings: [],
  stopTokenIds: [],
  topLogprobs: 0,
  seed,
});

describeEachBackend('serve engine: one prefill per distinct prompt', (backend) => {
  it('n completions of each group equal LanguageModel.sample with every copy prefilled', async () => {
    const lm = LanguageModel.load(dir);
    const rows: number[] = [];
    const forward = lm.model.forward.bind(lm.model);
    lm.model.forward = (ids, B, T, o) => {
      if (T > 1) rows.push(B);
      return forward(ids, B, T, o);
    };
    const texts = ['a b c d e', 'go f', 'a b c d e'];
    const prompts = texts.map((t) => lm.encode(t));
    const engine = new BatchEngine(lm, 'tiny', { maxBatch: 16 });
    const got = prompts.map(() => Array.from({ length: 4 }, () => [] as TokenEvent[]));
    const requests = prompts.map((p, k): GroupRequest => ({ model: 'tiny', promptIds: p, n: 4, spec: spec(100 + k), onToken: (i, ev) => got[k][i].push(ev) }));
    // Submitted in one turn of the event loop: admitted and prefilled together.
    await Promise.all(requests.map((r) => engine.submit(r)));
    await engine.close();
    assert.deepEqual(rows, [2], 'three groups of 4 rows, two distinct prompts: one prefill of 2 rows');

    lm.model.forward = forward;
    setSharedPrefill(false);
    try {
      for (const [k, p] of prompts.entries()) {
        const local = lm.sample(Array(4).fill(texts[k]), { maxNewTokens: 8, temperature: 1, topP: 1, topK: null, stopAtEos: false, rng: 100 + k });
        assert.deepEqual(
          local.map((s) => s.promptIds),
          Array(4).fill(p),
        );
        assert.deepEqual(
          got[k].map((evs) => evs.map((e) => e.token)),
          local.map((s) => s.completionIds),
          `group ${k}`,
        );
        for (const [i, evs] of got[k].entries()) {
          for (const [t, e] of evs.entries()) {
            const want = local[i].logprobs[t];
            assert.ok(Math.abs(e.logprob - want) <= 1e-5, `group ${k} row ${i} token ${t}: ${e.logprob} against ${want}`);
            if (backend === 'reference') assert.equal(e.logprob, want);
          }
        }
      }
    } finally {
      setSharedPrefill(true);
    }
  });

  it('a group joining a running batch gets the tokens and log-probs generate gives it alone', async () => {
    const lm = LanguageModel.load(dir);
    const engine = new BatchEngine(lm, 'tiny', { maxBatch: 16 });
    const first = lm.encode('a b c d e');
    const late = lm.encode('go f');
    const lateSpec: SamplingSpec = { ...spec(7), temperature: 0.7, topK: 4, maxNewTokens: 6 };
    const got = { first: [[], [], []] as number[][], late: [[], []] as number[][] };
    const lateLogprobs: number[][] = [[], []];
    let joined: Promise<void> | null = null;
    const submitLate = () =>
      engine.submit({
        model: 'tiny',
        promptIds: late,
        n: 2,
        spec: lateSpec,
        onToken: (i, ev) => {
          got.late[i].push(ev.token);
          lateLogprobs[i].push(ev.logprob);
        },
      });
    const running = engine.submit({
      model: 'tiny',
      promptIds: first,
      n: 3,
      spec: spec(5),
      onToken: (i, ev) => {
        got.first[i].push(ev.token);
        // Submitted from inside a step: admitted before the next one, beside the running rows.
        if (i === 0 && got.first[0].length === 2) joined = submitLate();
      },
    });
    await running;
    await joined;
    await engine.close();
    assert.equal(engine.stats.joinedMidFlight, 1);

    const options = (s: SamplingSpec) => ({ maxNewTokens: s.maxNewTokens, temperature: s.temperature, topK: s.topK, topP: s.topP, rng: s.seed });
    assert.deepEqual(got.first, generate(lm.model, Array(3).fill(first), options(spec(5))).tokens);
    const alone = generate(lm.model, Array(2).fill(late), options(lateSpec));
    assert.deepEqual(got.late, alone.tokens);
    for (const [i, lps] of lateLogprobs.entries())
      for (const [t, lp] of lps.entries()) assert.ok(Math.abs(lp - alone.logprobs[i][t]) <= 1e-5, `row ${i} token ${t}: ${lp} against ${alone.logprobs[i][t]}`);
  });

  it('requests for two adapters and the base decode in one batch, each as its weights alone would', async () => {
    const lm = LanguageModel.load(dir);
    const engine = new BatchEngine(lm, 'tiny', { maxBatch: 16 });
    const tmp = mkdtempSync(join(tmpdir(), 'magrpo-adapters-'));
    const rng = new Rng(9);
    // Two agents' adapters, saved as PEFT folders and loaded by name, as the rollout client does.
    const agents = [0, 1].map((a) => {
      const m = LanguageModel.load(dir);
      applyLora(m.model, { r: 2 + a, alpha: 8, targetModules: ['q_proj', 'v_proj', 'gate_proj', 'down_proj'] }, new Rng(20 + a));
      for (const ad of m.model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = rng.normal() * 0.5;
      saveLora(m.model, join(tmp, `agent${a}`), dir);
      engine.loadAdapter(`agent${a}`, join(tmp, `agent${a}`));
      return m;
    });
    const prompt = lm.encode('a b c d e');
    const models = ['agent0', 'base', 'agent1'];
    const got = models.map(() => [[], [], [], []] as number[][]);
    const logprobs = models.map(() => [[], [], [], []] as number[][]);
    await Promise.all(
      models.map((model, k) =>
        engine.submit({
          model: model === 'base' ? 'tiny' : model,
          promptIds: prompt,
          n: 4,
          spec: spec(30 + k),
          onToken: (i, ev) => {
            got[k][i].push(ev.token);
            logprobs[k][i].push(ev.logprob);
          },
        }),
      ),
    );
    await engine.close();
    rmSync(tmp, { recursive: true, force: true });
    assert.equal(engine.stats.maxRowsInStep, 12, 'the three groups decoded side by side');
    assert.ok(engine.stats.decodeSteps < 2 * 8, `${engine.stats.decodeSteps} decode steps for three groups of 8 tokens`);
    const options = { maxNewTokens: 8, temperature: 1, topK: null, topP: 1 };
    for (const [k, model] of [agents[0].model, lm.model, agents[1].model].entries()) {
      const alone = generate(model, Array(4).fill(prompt), { ...options, rng: 30 + k });
      assert.deepEqual(got[k], alone.tokens, `${models[k]}'s tokens`);
      for (const [i, lps] of logprobs[k].entries())
        for (const [t, lp] of lps.entries())
          assert.ok(Math.abs(lp - alone.logprobs[i][t]) <= 1e-4, `${models[k]} row ${i} token ${t}: ${lp} against ${alone.logprobs[i][t]}`);
    }
    assert.notDeepEqual(got[0], got[2], 'the adapters change what is sampled');
  });
});
