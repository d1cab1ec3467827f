/**
 * The base models shipped in models/: they load, their tokenizer round-trips text exactly, and the
 * validation perplexity on the card's fixed windows, recomputed here from its definition (not with
 * the pretraining code), matches eval.json and README.md within 1%.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readJsonlGz } from '../../src/data/build-corpus.js';
import { tokenLogprobs } from '../../src/engine/nn.js';
import { noGrad } from '../../src/engine/tensor.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { readSafetensorsHeader } from '../../src/model/safetensors.js';

interface EvalJson {
  model: { parameters: number; dtype: string };
  perplexity: { split: string; corpus_sha256: string; window_tokens: number; offsets: number[]; targets: number; mean_nll: number; perplexity: number };
  code: { tasks: number; parse_rate: number; pass_rate: number } | null;
}

const TEXTS = [
  'Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse,',
  'def add(a: int, b: int) -> int:\n    """Return a + b.\n    >>> add(1, 2)\n    3\n    """\n    return a + b\n',
  '  Tabs\tand  double  spaces, unicode: café, naïve, 東京, emoji 🎉\n\n\n',
];

const MODELS = [
  { dir: 'models/micro', minParams: 10_000, maxParams: 200_000, minContext: 128 },
  { dir: 'models/small', minParams: 5_000_000, maxParams: 15_000_000, minContext: 512 },
  { dir: 'models/base', minParams: 1_000_000, maxParams: 3_000_000, minContext: 512 },
  { dir: 'models/coder', minParams: 1_000_000, maxParams: 3_000_000, minContext: 512 },
];

for (const spec of MODELS) {
  test(`${spec.dir}: loads, round-trips text, and reproduces its card's validation perplexity`, () => {
    const lm = LanguageModel.load(spec.dir);
    const card = JSON.parse(readFileSync(join(spec.dir, 'eval.json'), 'utf8')) as EvalJson;
    const config = JSON.parse(readFileSync(join(spec.dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(config.model_type, 'llama');
    assert.equal(config.tie_word_embeddings, true);
    assert.equal(lm.model.numParams(), card.model.parameters);
    assert.ok(card.model.parameters >= spec.minParams && card.model.parameters <= spec.maxParams, `${card.model.parameters} parameters`);
    assert.ok(lm.model.maxPositions >= spec.minContext);
    const stored = new Set([...readSafetensorsHeader(join(spec.dir, 'model.safetensors')).tensors.values()].map((t) => t.dtype));
    assert.deepEqual([...stored], [card.model.dtype]);

    for (const text of TEXTS) assert.equal(lm.tokenizer.decode(lm.encode(text)), text);
    assert.equal(lm.tokenizer.vocabSize, 4096);
    assert.deepEqual([lm.tokenizer.bosId, lm.tokenizer.eosId, lm.tokenizer.padId], [0, 1, 2]);

    // The definition in eval.json: BOS doc EOS …, windows at the offsets, mean NLL of all next-token targets.
    const ppl = card.perplexity;
    assert.equal(createHash('sha256').update(readFileSync(ppl.split)).digest('hex'), ppl.corpus_sha256);
    const stream = readJsonlGz(ppl.split).flatMap((d) => [0, ...lm.tokenizer.encode(d.text, { addSpecialTokens: false }), 1]);
    const T = ppl.window_tokens - 1;
    let nll = 0;
    let count = 0;
    noGrad(() => {
      for (let i = 0; i < ppl.offsets.length; i += 8) {
        const offs = ppl.offsets.slice(i, i + 8);
        const ids = Int32Array.from(offs.flatMap((o) => stream.slice(o, o + T)));
        const targets = Int32Array.from(offs.flatMap((o) => stream.slice(o + 1, o + T + 1)));
        const lp = tokenLogprobs(lm.model.forward(ids, offs.length, T), targets);
        for (const v of lp.data) nll -= v;
        count += lp.size;
      }
    });
    assert.equal(count, ppl.targets);
    const perplexity = Math.exp(nll / count);
    assert.ok(Math.abs(perplexity / ppl.perplexity - 1) < 0.01, `recomputed ${perplexity}, card ${ppl.perplexity}`);

    const readme = readFileSync(join(spec.dir, 'README.md'), 'utf8');
    assert.ok(readme.includes(`Validation perplexity: ${ppl.perplexity.toFixed(2)}`));
    assert.ok(readme.includes('../../data/README.md'));
    assert.ok(card.code !== null && card.code.tasks === 200);
    assert.ok(card.code.pass_rate <= card.code.parse_rate);
  });
}
