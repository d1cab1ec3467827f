import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { attestedTrigrams, classTrigrams, FUNCTION_WORDS, grammarTrigrams, grammarValidity, wordClasses } from '../../src/text/grammar.js';

test('word classes: function words stay, other words become W, contractions expand', () => {
  assert.deepEqual(wordClasses("The whale didn't see us, and we'll sail in 1851!"), [
    'the',
    'W',
    'did',
    'not',
    'W',
    'us',
    ',',
    'and',
    'we',
    'will',
    'W',
    'in',
    'N',
    '.',
  ]);
  assert.deepEqual(wordClasses("I can't — won't; the man's (old) boat"), ['i', 'can', 'not', ';', 'will', 'not', ';', 'the', 'W', 'is', '(', 'W', '(', 'W']);
  // Case does not matter, curly apostrophes are straight ones.
  assert.deepEqual(wordClasses('THE Ship’s'), ['the', 'W', 'is']);
  assert.equal(new Set(FUNCTION_WORDS).size, FUNCTION_WORDS.length, 'no duplicate function words');
});

test('trigrams never span a line break', () => {
  assert.deepEqual(classTrigrams('the whale rose\nand the'), ['the W W']);
});

test('English prose scores high: held-out corpus paragraphs and the TL;DR posts', () => {
  const prose = gunzipSync(readFileSync('data/corpus/validation.jsonl.gz'))
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { source: string; text: string })
    .filter((d) => ['brown', 'sotu', 'moby-dick'].includes(d.source))
    .flatMap((d) => d.text.split('\n'))
    .filter((p) => p.length > 100);
  assert.ok(prose.length > 100);
  const scores = prose.map(grammarValidity).sort((a, b) => a - b);
  const mean = scores.reduce((a, b) => a + b, 0) / scores.length;
  assert.ok(mean > 0.93, `mean ${mean}`);
  assert.ok(scores[Math.floor(scores.length * 0.05)] > 0.85, `5th percentile ${scores[Math.floor(scores.length * 0.05)]}`);
  assert.equal(grammarValidity('The business of the Union that this Government has in the direct message of Congress to the last year.'), 1);
});

test('real words in no English order score low', () => {
  const cases: [string, string, number][] = [
    ['conjunction chains', 'in this day, to th a time, and, and be filled and devourant, and in any moment,, in the time; and, and, did not.', 0.9],
    ['run-on function words', 'a jar is the only difference of the completely the was the first was the was suit of the terr was the he is still.', 0.75],
    ['a run of one function word', 'the the the the the the the the', 0],
    ['shuffled function words', 'of the and to in was it he that is for', 0.3],
    ['too short to judge', 'the whale', 0],
    ['empty', '', 0],
  ];
  for (const [name, text, max] of cases) assert.ok(grammarValidity(text) <= max, `${name}: ${grammarValidity(text)} > ${max}`);
  const bad = grammarTrigrams('the was the was')
    .filter((g) => !g.attested)
    .map((g) => g.trigram);
  assert.deepEqual(bad, ['the was the', 'was the was']);
});

test('the shipped table is the one the build script makes from the corpus', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-grammar-table.ts', '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test('the table holds common English orders and not the degenerate ones', () => {
  const table = attestedTrigrams();
  assert.ok(table.size > 10_000);
  for (const g of ['the W of', 'W of the', 'W , and', 'it is W']) assert.ok(table.has(g), g);
  for (const g of ['and , and', 'the was the', 'the the W']) assert.ok(!table.has(g), g);
});
