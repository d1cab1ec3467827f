/**
 * Eval problems are not training material: the coop-python eval problems share no solution (by
 * normalized function body: docstrings, comments and layout removed) with the coop-python training
 * items, and the large pretraining corpus reproduces no eval problem (function body or 13-word run,
 * the build's own filter re-run over the built file). The shipped small corpus predates the filter
 * and is known to contain coop-python eval solutions (data/README.md); its count is asserted so a
 * change shows up.
 *
 * The pretraining corpora are not committed (minutes to build), so on a fresh clone the check runs
 * on the committed hash index instead (data/decontam-index.json, scripts/decontam-index.ts): the
 * eval problems' fingerprints recomputed from the committed files must be those the corpus shards
 * were checked against, with no hit. Where a shard is built, it is scanned in full as well.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CORPORA, changedProblems, evalHashes, INDEX_FILE, manifestEvalSets, manifestShard, readIndex } from '../../scripts/decontam-index.js';
import { readJsonlGz } from '../../src/data/build-corpus.js';
import { DecontamIndex, MIN_BODY_CHARS, readEvalProblems } from '../../src/data/decontam.js';
import { pythonDefs } from '../../src/data/pydefs.js';
import { skipTest } from '../helpers/skip.js';

const EVAL = readEvalProblems('data/coding/coop-python.eval.jsonl', 'coop-python-eval');
const HUMANEVAL = readEvalProblems('data/humaneval/HumanEval.jsonl.gz', 'humaneval');
const LARGE = '.cache/data/large/train.jsonl.gz';
const CODE_STAGE = '.cache/data/code-stage/train.jsonl.gz';
const hash = (body: string) => createHash('sha256').update(body).digest('hex');
const sha256File = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Hashes of the normalized bodies of every function (≥ MIN_BODY_CHARS) in `programs`. */
function bodyHashes(programs: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const p of programs) for (const d of pythonDefs(p)) if (d.body.length >= MIN_BODY_CHARS) out.add(hash(d.body));
  return out;
}

/** Documents of a pretraining corpus file that reproduce a coop-python or HumanEval eval problem (at most 10). */
function contaminated(file: string): string[] {
  const index = new DecontamIndex([...EVAL, ...HUMANEVAL]);
  const hits: string[] = [];
  for (const d of readJsonlGz(file)) {
    const hit = index.check(d.text);
    if (hit) hits.push(`${d.source}: ${hit.problem} (${hit.kind}: ${hit.evidence})`);
    if (hits.length >= 10) break;
  }
  return hits;
}

describe('eval problems are disjoint from training data', () => {
  it('coop-python: no eval solution body occurs among the training items', () => {
    const train = readEvalProblems('data/coding/coop-python.train.jsonl', 'coop-python-train');
    assert.ok(train.length >= 300 && EVAL.length >= 100, `${train.length} train, ${EVAL.length} eval`);
    // the entry point's body of each eval problem (helpers are shared by design: is_prime etc.)
    const evalBodies = new Map<string, string>();
    for (const p of EVAL)
      for (const s of p.solutions)
        for (const d of pythonDefs(s)) if (d.name === p.entryPoint && d.body.length >= MIN_BODY_CHARS) evalBodies.set(hash(d.body), p.id);
    assert.ok(evalBodies.size >= EVAL.length, `${evalBodies.size} eval bodies`);
    const trainBodies = bodyHashes(train.flatMap((p) => p.solutions));
    const shared = [...evalBodies].filter(([h]) => trainBodies.has(h)).map(([, id]) => id);
    assert.deepEqual(shared, []);
  });

  it('the committed hash index: the corpus shards were checked against exactly these eval problems, without a hit', () => {
    const index = readIndex();
    const now = evalHashes();
    const changed = changedProblems(index.problems, now.problems);
    assert.deepEqual(
      changed,
      [],
      `eval problems added, removed or changed (or their normalization) since the corpora were checked against them: ${changed.slice(0, 10).join(', ')}; ` +
        `build the corpora (npm run data:large; npx tsx scripts/build-code-stage-data.ts), then npx tsx scripts/decontam-index.ts, and commit ${INDEX_FILE}`,
    );
    const { corpora, about, ...recorded } = index;
    assert.deepEqual(recorded, now, `${INDEX_FILE} is not what scripts/decontam-index.ts computes from the eval files`);
    assert.deepEqual(
      corpora.map((c) => c.name),
      CORPORA.map((c) => c.name),
    );
    for (const c of corpora) {
      // the index speaks of the shards the committed manifests describe, checked against today's fingerprints
      assert.deepEqual(
        { sha256: c.sha256, docs: c.docs },
        manifestShard('.', c.manifest),
        `${c.name}: ${c.manifest} describes another shard than ${INDEX_FILE}`,
      );
      assert.equal(c.eval_fingerprints, now.fingerprints.sha256, `${c.name}: checked against other eval fingerprints`);
      assert.equal(c.hits, 0, `${c.name}: ${c.hits} documents reproduce an eval problem`);
      for (const e of manifestEvalSets('.', c.manifest) ?? []) {
        assert.equal(e.sha256, now.eval_sets.find((x) => x.path === e.path)?.sha256, `${c.manifest}: decontaminated against another ${e.path}`);
      }
    }
    // the large corpus's build recorded the same fingerprint counts and no eval prompt left
    const large = JSON.parse(readFileSync('data/manifest-large.json', 'utf8'));
    assert.deepEqual(large.decontamination.fingerprints, { bodies: now.fingerprints.bodies, ngrams: now.fingerprints.ngrams });
    assert.equal(large.decontamination.prompts_in_corpus, 0);
    const stage = JSON.parse(readFileSync('data/manifest-code-stage.json', 'utf8'));
    assert.equal(
      stage.inputs.large_sha256,
      manifestShard('.', 'data/manifest-large.json').sha256,
      'the code stage was built from the large corpus in the index',
    );
  });

  it('the large pretraining corpus reproduces no coop-python or HumanEval problem', (t) => {
    if (!existsSync(LARGE)) {
      skipTest(t, 'large-corpus', `${LARGE} is not built here (npm run data:large); the committed hash index was checked instead`);
      return;
    }
    assert.equal(sha256File(LARGE), readIndex().corpora.find((c) => c.name === 'large')?.sha256, `${LARGE} is another build than the index's`);
    assert.deepEqual(contaminated(LARGE), []);
  });

  it('the code stage corpus (models/coder) reproduces no coop-python or HumanEval problem, and its data card says what was dropped', (t) => {
    const manifest = JSON.parse(readFileSync('data/manifest-code-stage.json', 'utf8')) as {
      eval_prompts_in_corpus: number;
      file: { sha256: string };
      compose_templates: Record<string, { kept: number }>;
    };
    assert.equal(manifest.eval_prompts_in_corpus, 0);
    const card = readFileSync('data/code-stage.md', 'utf8');
    assert.ok(card.includes(manifest.file.sha256));
    for (const [name, tpl] of Object.entries(manifest.compose_templates)) if (tpl.kept === 0) assert.match(card, new RegExp(`\`${name}\`.*\\| 0 \\|`));
    if (!existsSync(CODE_STAGE)) {
      skipTest(
        t,
        'code-stage-corpus',
        `${CODE_STAGE} is not built here (scripts/build-code-stage-data.ts, after npm run data:large); the committed hash index was checked instead`,
      );
      return;
    }
    assert.equal(sha256File(CODE_STAGE), readIndex().corpora.find((c) => c.name === 'code-stage')?.sha256, `${CODE_STAGE} is another build than the index's`);
    assert.deepEqual(contaminated(CODE_STAGE), []);
    const text = readJsonlGz(CODE_STAGE)
      .map((d) => d.text)
      .join('\n');
    assert.deepEqual(
      EVAL.filter((p) => text.includes(p.prompt.trim())).map((p) => p.id),
      [],
    );
  });

  it('the shipped small corpus (before the filter existed) holds coop-python eval solutions: documented, counted', () => {
    const evalBodies = new Set<string>();
    for (const p of EVAL)
      for (const s of p.solutions) for (const d of pythonDefs(s)) if (d.name === p.entryPoint && d.body.length >= MIN_BODY_CHARS) evalBodies.add(hash(d.body));
    const docs = readJsonlGz('data/corpus/train.jsonl.gz');
    let contaminated = 0;
    for (const d of docs) if (d.text.includes('def ') && pythonDefs(d.text).some((f) => evalBodies.has(hash(f.body)))) contaminated++;
    // models/small was trained on this corpus: its coop-python numbers are not clean evidence
    assert.ok(contaminated > 0, 'if this reaches 0 the small corpus was rebuilt: update data/README.md and the model card');
  });
});
