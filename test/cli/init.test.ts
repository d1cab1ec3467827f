/** `magrpo init`: the scaffolded custom environment trains as generated (a user's .ts loaded at run time). */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { scaffold } from '../../src/cli/init.js';
import { train } from '../../src/cli/train.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

const tmp = mkdtempSync(join(tmpdir(), 'magrpo-init-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe('magrpo init', () => {
  it('scaffolds env.ts, config.yaml and README.md, and the result trains for a couple of items', async () => {
    const model = makeTinyModel({ seed: 3, dir: join(tmp, 'tiny') });
    const dir = scaffold(join(tmp, 'my-task'), model);
    for (const f of ['env.ts', 'config.yaml', 'README.md']) assert.ok(existsSync(join(dir, f)), f);
    assert.match(readFileSync(join(dir, 'config.yaml'), 'utf8'), /^ {2}module: \.\/env\.ts$/m);
    assert.match(readFileSync(join(dir, 'config.yaml'), 'utf8'), /^model: "\.\.\/tiny"$/m, 'the model path is relative to the config');

    const report = await train(join(dir, 'config.yaml'), {
      quiet: true,
      maxItems: 2,
      set: [`output_dir=${join(tmp, 'runs')}`, 'run_name=first', 'trainer.max_new_tokens=4'],
    });
    assert.equal(report.status, 'stopped');
    assert.equal(report.items, 2);
    assert.equal(report.env, 'two-halves');
    assert.equal(report.env_step, 8, '2 items × 4 joint actions');
    const metrics = readFileSync(join(tmp, 'runs', 'first', 'metrics.jsonl'), 'utf8');
    for (const c of ['both_wrote', 'balanced', 'on_topic']) assert.match(metrics, new RegExp(`"turn_1/reward/${c}"`));
    assert.deepEqual(
      report.final_eval?.rows.map((r) => r.method),
      ['magrpo'],
    );
    assert.equal(report.final_eval?.items, 2);
  });

  it('refuses to scaffold into a folder that is not empty', () => {
    assert.throws(() => scaffold(join(tmp, 'my-task')), /exists and is not empty/);
  });
});
