/** The committed data card is exactly what the committed manifests (small and large corpus) render to. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { type Manifest, renderDataCard, SOURCE_NOTES } from '../../src/data/datacard.js';
import { type LargeManifest, renderLargeCard } from '../../src/data/datacard-large.js';

const dataDir = join(import.meta.dirname, '../../data');

describe('renderDataCard', () => {
  const manifest = JSON.parse(readFileSync(join(dataDir, 'manifest.json'), 'utf8')) as Manifest;
  const card = renderDataCard(manifest);
  const large = JSON.parse(readFileSync(join(dataDir, 'manifest-large.json'), 'utf8')) as LargeManifest;

  it('matches data/README.md', () => {
    assert.equal(readFileSync(join(dataDir, 'README.md'), 'utf8'), `${card}\n${renderLargeCard(large)}`);
  });

  it('lists every file hash and every source licence', () => {
    for (const f of manifest.files) assert.ok(card.includes(f.sha256), f.path);
    for (const s of manifest.sources) assert.ok(card.includes(SOURCE_NOTES[s.source].contentLicense), s.source);
  });
});
