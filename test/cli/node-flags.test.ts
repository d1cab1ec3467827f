/** cli/node-flags.ts: the V8 flags reach every way the CLI starts, and child processes get them once. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { childExecArgv, NODE_FLAGS } from '../../src/cli/node-flags.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('NODE_FLAGS', () => {
  it("is in main.ts's shebang and in scripts/main.sh (npm start)", () => {
    const shebang = readFileSync(`${root}src/cli/main.ts`, 'utf8').split('\n')[0];
    assert.match(shebang, /^#!\/usr\/bin\/env -S node /);
    const main = readFileSync(`${root}scripts/main.sh`, 'utf8');
    for (const flag of NODE_FLAGS) {
      assert.ok(shebang.split(' ').includes(flag), `shebang lacks ${flag}`);
      assert.ok(main.includes(`node ${NODE_FLAGS.join(' ')} dist/src/cli/main.js`), `scripts/main.sh lacks ${flag}`);
    }
  });

  it('is added to a child process once, after the parent flags, and not twice when the parent has it', () => {
    const args = childExecArgv();
    for (const flag of NODE_FLAGS) assert.equal(args.filter((a) => a.split('=')[0] === flag.split('=')[0]).length, 1);
    // A node started with the flag passes it on as is (no duplicate).
    const code = `import(${JSON.stringify(`${root}src/cli/node-flags.ts`)}).then((m) => console.log(JSON.stringify(m.childExecArgv())))`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', ...NODE_FLAGS, '-e', code], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const childArgs: string[] = JSON.parse(r.stdout.trim().split('\n').pop() ?? '[]');
    for (const flag of NODE_FLAGS) assert.equal(childArgs.filter((a) => a === flag).length, 1, JSON.stringify(childArgs));
  });

  it('is a flag this node accepts', () => {
    const r = spawnSync(process.execPath, [...NODE_FLAGS, '-e', 'process.exit(0)'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });
});
