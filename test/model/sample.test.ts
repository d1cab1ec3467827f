/** Sampling: determinism by seed, and an observable effect of every option. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { loadModel } from '../../src/model/load.js';
import { type DecodeRule, Decoder, generate, sampleRows } from '../../src/model/sample.js';
import { TextTokenizer } from '../../src/model/tokenizer.js';
import { describeEachBackend } from '../helpers/backends.js';

const DIR = 'test/fixtures/models/tiny-qwen2';

describeEachBackend('sampling', () => {
  const model = loadModel(DIR);
  const prompts = [
    [10, 20, 30],
    [40, 50],
    [60, 70, 80, 90],
  ];
  const n = 12;
  const distinct = (seqs: number[][]) => new Set(seqs.flat()).size;

  it('the same seed gives the same tokens; another seed gives others', () => {
    const a = generate(model, prompts, { maxNewTokens: n, temperature: 1, rng: 7 });
    const b = generate(model, prompts, { maxNewTokens: n, temperature: 1, rng: 7 });
    const c = generate(model, prompts, { maxNewTokens: n, temperature: 1, rng: 8 });
    assert.deepEqual(a.tokens, b.tokens);
    assert.notDeepEqual(a.tokens, c.tokens);
  });

  it('batched sampling equals one-by-one greedy decoding (padding does not leak)', () => {
    const batched = generate(model, prompts, { maxNewTokens: n, temperature: 0 });
    for (const [i, p] of prompts.entries()) assert.deepEqual(generate(model, [p], { maxNewTokens: n, temperature: 0 }).tokens[0], batched.tokens[i]);
  });

  it('temperature, top-k and top-p each narrow the sampled distribution', () => {
    const many = Array.from({ length: 16 }, () => [10, 20, 30]);
    const hot = distinct(generate(model, many, { maxNewTokens: 8, temperature: 2, rng: 1 }).tokens);
    const cold = distinct(generate(model, many, { maxNewTokens: 8, temperature: 0.05, rng: 1 }).tokens);
    const topk = distinct(generate(model, many, { maxNewTokens: 8, temperature: 2, topK: 2, rng: 1 }).tokens);
    const topp = distinct(generate(model, many, { maxNewTokens: 8, temperature: 2, topP: 0.1, rng: 1 }).tokens);
    assert.ok(cold < hot, `temperature: ${cold} < ${hot}`);
    assert.ok(topk < hot, `top-k: ${topk} < ${hot}`);
    assert.ok(topp < hot, `top-p: ${topp} < ${hot}`);
    // top-k = 1 is greedy
    const greedy = generate(model, prompts, { maxNewTokens: n, temperature: 0 });
    assert.deepEqual(generate(model, prompts, { maxNewTokens: n, temperature: 1.5, topK: 1, rng: 3 }).tokens, greedy.tokens);
  });

  it('stops at stop tokens and stop strings, and reports why', () => {
    const greedy = generate(model, [prompts[0]], { maxNewTokens: n, temperature: 0 });
    const stopTok = greedy.tokens[0][3];
    const s = generate(model, [prompts[0]], { maxNewTokens: n, temperature: 0, stopTokenIds: [stopTok] });
    assert.equal(s.finishReasons[0], 'stop_token');
    assert.deepEqual(s.tokens[0], greedy.tokens[0].slice(0, greedy.tokens[0].indexOf(stopTok) + 1));

    const tok = TextTokenizer.fromDir(DIR);
    const decode = (ids: number[]) => tok.decode(ids);
    const full = generate(model, [prompts[0]], { maxNewTokens: n, temperature: 0, decode });
    const text = full.texts[0];
    const stop = text.slice(2, 4);
    const cut = generate(model, [prompts[0]], { maxNewTokens: n, temperature: 0, decode, stopStrings: [stop] });
    assert.equal(cut.finishReasons[0], 'stop_string');
    assert.equal(cut.texts[0], text.slice(0, text.indexOf(stop)));
    assert.equal(full.finishReasons[0], 'length');
    assert.equal(full.tokens[0].length, n);
  });

  it('returns log-probs of the sampled tokens under the model', () => {
    const r = generate(model, prompts, { maxNewTokens: 5, temperature: 1, rng: 2 });
    for (const lps of r.logprobs) for (const lp of lps) assert.ok(lp <= 0 && Number.isFinite(lp));
  });

  it('a Decoder stepped by hand, admitting a group mid-flight, gives each group the tokens of generate alone', () => {
    const rule = (temperature: number, topK: number | null, maxNewTokens: number): DecodeRule => ({
      maxNewTokens,
      temperature,
      topK,
      topP: 1,
      stopIds: new Set([5]),
    });
    const a = { prompt: prompts[0], rule: rule(1, null, n), seed: 11, rows: 3 };
    const b = { prompt: prompts[1], rule: rule(0.7, 4, n + 3), seed: 12, rows: 2 };
    const decoder = new Decoder<string>(model);
    const admit = (g: typeof a, name: string) => {
      const rng = new Rng(g.seed);
      return decoder.admit(Array.from({ length: g.rows }, (_, i) => ({ tag: `${name}${i}`, prompt: g.prompt, rule: g.rule, rng })));
    };
    const seqs = admit(a, 'a').map((p) => p.seq);
    decoder.step();
    decoder.step();
    assert.ok(decoder.running.length > 0, 'b joins while a decodes');
    seqs.push(...admit(b, 'b').map((p) => p.seq));
    while (decoder.running.length > 0) decoder.step();
    for (const [g, from] of [
      [a, 0],
      [b, 3],
    ] as const) {
      const alone = generate(model, Array(g.rows).fill(g.prompt), { ...g.rule, stopTokenIds: [5], rng: g.seed });
      assert.deepEqual(
        seqs.slice(from, from + g.rows).map((s) => s.tokens),
        alone.tokens,
      );
    }
  });

  it('rejects prompts that overflow the context and bad options', () => {
    assert.throws(() => generate(model, [[1]], { maxNewTokens: 10_000 }), /context/);
    assert.throws(() => generate(model, [[1]], { maxNewTokens: 2, topP: 0 }), /top_p/);
    assert.throws(() => generate(model, [[]], { maxNewTokens: 2 }), /empty/);
  });
});

describeEachBackend('prompt truncation', () => {
  it("'left' keeps the prompt's end (and BOS) so prompt + new tokens fit; 'none' is an error", async () => {
    const { LanguageModel } = await import('../../src/model/pretrained.js');
    const lm = LanguageModel.load(DIR);
    const long = 'word '.repeat(200);
    assert.throws(() => lm.sample([long], { maxNewTokens: 8 }), /context/);
    const [s] = lm.sample([long], { maxNewTokens: 8, truncate: 'left', temperature: 0 });
    assert.equal(s.promptIds.length, lm.model.maxPositions - 8);
    const full = lm.encode(long);
    assert.deepEqual(s.promptIds.slice(-5), full.slice(-5));
  });
});

describeEachBackend('top-p over the whole vocabulary', () => {
  /** The definition: every token sorted (descending logit, ties by index), the shortest run reaching topP, an inverse-CDF draw. */
  function fullSort(V: number, row: Float32Array, T: number, topP: number, u: number): number {
    const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => row[b] - row[a] || a - b);
    const p = order.map((i) => Math.exp((row[i] - row[order[0]]) / T));
    const sum = p.reduce((x, y) => x + y, 0);
    let keep = V;
    for (let i = 0, acc = 0; i < V; i++) {
      acc += p[i];
      if (acc >= topP * sum) {
        keep = i + 1;
        break;
      }
    }
    const total = p.slice(0, keep).reduce((x, y) => x + y, 0);
    for (let i = 0, acc = 0; i < keep; i++) {
      acc += p[i] / total;
      if (acc > u) return order[i];
    }
    return order[keep - 1];
  }

  it('draws what sorting every token draws: peaked and flat rows (a nucleus past the first candidates), ties', () => {
    const V = 3000;
    const rng = new Rng(7);
    const rows: Float32Array[] = [
      Float32Array.from({ length: V }, () => rng.normal() * 4), // peaked: a nucleus of a few dozen
      Float32Array.from({ length: V }, () => rng.normal() * 0.05), // nearly flat: most of the vocabulary
      Float32Array.from({ length: V }, (_, i) => Math.floor(i / 7) % 5), // ties everywhere
    ];
    let checked = 0;
    for (const [T, topP] of [
      [0.7, 0.9],
      [1, 0.5],
      [1.3, 0.99],
    ]) {
      for (let draw = 0; draw < 40; draw++) {
        const logits = new Float32Array(rows.length * V);
        for (const [i, r] of rows.entries()) logits.set(r, i * V);
        const seed = 100 * draw + 1;
        const got = generateRow(logits, rows.length, V, T, topP, seed);
        const u = new Rng(seed);
        for (const [i, r] of rows.entries()) assert.equal(got[i], fullSort(V, r, T, topP, u.next()), `row ${i}, T ${T}, top-p ${topP}, draw ${draw}`);
        checked += rows.length;
      }
    }
    assert.equal(checked, 360);
  });

  function generateRow(logits: Float32Array, rows: number, V: number, T: number, topP: number, seed: number): Int32Array {
    return sampleRows(rows, V, logits, T, null, topP, new Rng(seed));
  }
});
