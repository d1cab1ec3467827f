/** The token-boundary view's data: every id's piece, from the run's own tokenizer. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type DashboardServer, startDashboard } from '../../src/dashboard/server.js';
import { runTokenizerDir, tokenPieces } from '../../src/dashboard/tokens.js';
import { TextTokenizer } from '../../src/model/tokenizer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

describe('token pieces for the rollout browser', () => {
  let model = '';
  let run = '';
  let bare = '';
  let server: DashboardServer;
  before(async () => {
    model = makeTinyModel({ seed: 5 });
    run = mkdtempSync(join(tmpdir(), 'magrpo-tokens-'));
    bare = mkdtempSync(join(tmpdir(), 'magrpo-tokens-'));
    writeFileSync(join(run, 'config.yaml'), `model: ${model}\nrun_name: x\n`);
    server = await startDashboard({ runs: [run, bare], port: 0 });
  });
  after(async () => {
    await server.close();
    for (const d of [model, run, bare]) rmSync(d, { recursive: true, force: true });
  });

  it('finds the model its config names, and none for a run without one', () => {
    assert.equal(runTokenizerDir(run), model);
    assert.equal(runTokenizerDir(bare), null);
  });

  it('pieces concatenate back to the decoded text of a sampled id sequence (byte-level BPE: models/micro)', () => {
    const tok = TextTokenizer.fromDir('models/micro');
    const pieces = tokenPieces('models/micro');
    assert.equal(pieces.length, tok.vocabSize);
    const ids = tok.encode('The whale rose beside the ship at dawn.\n\ndef f(x):\n    return x', { addSpecialTokens: false });
    assert.ok(ids.length > 1);
    assert.equal(ids.map((i) => pieces[i]).join(''), tok.decode(ids));
  });

  it('are served as /runs/<id>/tokens.json, and a run without a tokenizer gets a clear 404', async () => {
    const r = await fetch(new URL('/runs/0/tokens.json', server.url));
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), tokenPieces(model));
    const missing = await fetch(new URL('/runs/1/tokens.json', server.url));
    assert.equal(missing.status, 404);
    assert.match(await missing.text(), /no tokenizer for this run/);
  });
});
