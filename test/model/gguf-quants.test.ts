/**
 * GGUF dequantization, bit for bit against gguf-py 0.19.0's `gguf.quants.dequantize`: the cases of
 * test/fixtures/gguf/quants.json (scripts/make_gguf_fixtures.py: random blocks with finite scales
 * of every magnitude, blocks gguf-py quantized, blocks of SmolLM2-135M-Instruct.Q4_1.gguf, every
 * special f16), each read from an aligned and two unaligned byte offsets; the errors; and, when a
 * Python with gguf is around (MAGRPO_GGUF_PYTHON, .cache/venv-llama or .cache/gguf-venv), fresh
 * random blocks of every type dequantized by gguf-py in a subprocess.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { DEQUANTIZABLE_TYPES, dequantize, GGML_TYPES, GgmlQuantError, ggmlByteSize, ggmlTypeName } from '../../src/model/gguf-quants.js';
import { skipTest } from '../helpers/skip.js';

const ROOT = join(import.meta.dirname, '..', '..');

interface Case {
  name: string;
  type: number;
  n: number;
  /** base64 of the raw block bytes */
  bytes: string;
  /** base64 of gguf-py's float32 output, little-endian */
  expected: string;
}

const fixture = JSON.parse(readFileSync(join(ROOT, 'test', 'fixtures', 'gguf', 'quants.json'), 'utf8')) as { f16_all_sha256: string; cases: Case[] };

const fromBase64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));
const toBase64 = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');

/** A copy of bytes that starts `offset` bytes into a fresh buffer. */
function atOffset(bytes: Uint8Array, offset: number): Uint8Array {
  const view = new Uint8Array(new ArrayBuffer(bytes.length + offset + 1), offset, bytes.length);
  view.set(bytes);
  return view;
}

const hex = (u: number): string => `0x${u.toString(16).padStart(8, '0')}`;

/** Equal Uint32 bit patterns, else the first mismatching element and how many differ. */
function assertSameBits(got: Float32Array, wantBytes: Uint8Array, label: string): void {
  const want = new Uint32Array(wantBytes.slice().buffer);
  const bits = new Uint32Array(got.buffer, got.byteOffset, got.length);
  assert.equal(bits.length, want.length, `${label}: length`);
  let first = -1;
  let count = 0;
  for (let i = 0; i < want.length; i++) {
    if (bits[i] !== want[i]) {
      if (first < 0) first = i;
      count++;
    }
  }
  if (first >= 0) {
    const f = new Float32Array(new Uint32Array([bits[first], want[first]]).buffer);
    assert.fail(
      `${label}: element ${first} of ${want.length} is ${hex(bits[first])} (${f[0]}), gguf-py gives ${hex(want[first])} (${f[1]}); ${count} elements differ`,
    );
  }
}

describe('dequantize: bit for bit as gguf-py 0.19.0', () => {
  it('the fixture covers every supported type, each with random blocks', () => {
    const random = new Set(fixture.cases.filter((c) => c.name.startsWith('random')).map((c) => c.type));
    assert.deepEqual(
      [...random].sort((a, b) => a - b),
      [...DEQUANTIZABLE_TYPES].sort((a, b) => a - b),
    );
    assert.equal(DEQUANTIZABLE_TYPES.length, 13);
  });

  for (const c of fixture.cases) {
    it(`${ggmlTypeName(c.type)}: ${c.name}`, () => {
      const bytes = fromBase64(c.bytes);
      const want = fromBase64(c.expected);
      for (const offset of [0, 1, 3]) assertSameBits(dequantize(c.type, atOffset(bytes, offset), c.n), want, `${c.name}, byte offset ${offset}`);
    });
  }

  it('F16: all 65536 bit patterns (subnormals, inf, NaN payloads) as numpy astype(float32)', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const out = dequantize(1, new Uint8Array(all.buffer), 65536);
    assert.equal(createHash('sha256').update(new Uint8Array(out.buffer)).digest('hex'), fixture.f16_all_sha256);
  });
});

describe('ggml types and errors', () => {
  it('names and sizes types by id', () => {
    assert.equal(ggmlTypeName(12), 'Q4_K');
    assert.equal(ggmlTypeName(16), 'IQ2_XXS');
    assert.equal(ggmlTypeName(5), 'unknown ggml type 5');
    assert.equal(ggmlByteSize(3, 576 * 1536), (576 * 1536 * 20) / 32);
    assert.equal(ggmlByteSize(14, 512), 420);
    assert.equal(ggmlByteSize(30, 3), 6);
    assert.equal(ggmlByteSize(23, 256), 136);
  });

  it('an unknown type id is an error naming the id', () => {
    assert.throws(
      () => dequantize(5, new Uint8Array(18), 32),
      (e: unknown) => {
        assert.ok(e instanceof GgmlQuantError);
        assert.equal(e.code, 'UNSUPPORTED_DTYPE');
        assert.match(e.message, /^unknown ggml type id 5 — gguf-py 0\.19\.0 knows ids 0, 1, 2, 3, 6, /);
        return true;
      },
    );
    assert.throws(() => ggmlByteSize(99, 32), /unknown ggml type id 99/);
  });

  it('a known type without a dequantizer is an error naming it and listing the supported ones', () => {
    for (const id of [16, 20, 23, 9, 15, 34]) {
      assert.throws(
        () => dequantize(id, new Uint8Array(ggmlByteSize(id, 256)), 256),
        (e: unknown) =>
          e instanceof GgmlQuantError && e.code === 'UNSUPPORTED_DTYPE' && e.message.includes(`cannot dequantize ggml type ${ggmlTypeName(id)} (id ${id})`),
      );
    }
    assert.throws(() => dequantize(16, new Uint8Array(66), 256), {
      message: 'cannot dequantize ggml type IQ2_XXS (id 16) — supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16',
    });
  });

  it('a byte length that does not match the element count is an error with both sizes', () => {
    assert.throws(() => dequantize(3, new Uint8Array(39), 64), {
      name: 'GgmlQuantError',
      message: 'Q4_1: 64 elements take 40 bytes, got 39 bytes — the tensor data is truncated or its shape is wrong',
    });
    assert.throws(() => dequantize(0, new Uint8Array(12), 2), /F32: 2 elements take 8 bytes, got 12 bytes/);
  });

  it('an element count that is not a whole number of blocks is an error naming the type', () => {
    for (const [type, n] of [
      [12, 100],
      [2, 33],
      [14, 257],
    ]) {
      const t = GGML_TYPES[type];
      const message = `${t.name}: ${n} elements is not a whole number of ${t.name} blocks (${t.blockSize} elements each)`;
      assert.throws(() => ggmlByteSize(type, n), { name: 'GgmlQuantError', code: 'SHAPE_MISMATCH', message });
      assert.throws(() => dequantize(type, new Uint8Array(1000), n), { message });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// live comparison with gguf-py

/** Byte offsets of the f16 scale fields of one block (as in scripts/make_gguf_fixtures.py). */
const SCALE_FIELDS: Record<number, number[]> = { 8: [0], 2: [0], 3: [0, 2], 6: [0], 7: [0, 2], 10: [80, 82], 11: [108], 12: [0, 2], 13: [0, 2], 14: [208] };

const ggufPython = [process.env.MAGRPO_GGUF_PYTHON, join(ROOT, '.cache', 'venv-llama', 'bin', 'python'), join(ROOT, '.cache', 'gguf-venv', 'bin', 'python')]
  .filter((p): p is string => p !== undefined && p !== '' && existsSync(p))
  .find((p) => spawnSync(p, ['-c', 'import gguf, numpy'], { stdio: 'ignore', timeout: 60_000 }).status === 0);

const LIVE_SCRIPT = `
import base64, json, sys, importlib.metadata
import numpy as np
from gguf import GGMLQuantizationType as T, quants
from gguf.constants import GGML_QUANT_SIZES
cases = json.load(sys.stdin)
out = [base64.b64encode(quants.dequantize(np.frombuffer(base64.b64decode(c["bytes"]), dtype=np.uint8).reshape(1, -1), T(c["type"])).astype(np.float32).tobytes()).decode() for c in cases]
sizes = {int(t): [t.name, *GGML_QUANT_SIZES[t]] for t in T}
print(json.dumps({"version": importlib.metadata.version("gguf"), "out": out, "sizes": sizes}))
`;

/** Random blocks with every f16 scale field a random finite f16 (normal, subnormal or zero, either sign). */
function randomBlocks(rng: Rng, type: number, nBlocks: number): Uint8Array {
  const { typeSize } = GGML_TYPES[type];
  const bytes = new Uint8Array(nBlocks * typeSize).map(() => rng.int(256));
  for (let blk = 0; blk < nBlocks; blk++) {
    for (const off of SCALE_FIELDS[type] ?? []) {
      const bits = (rng.int(2) << 15) | (rng.int(31) << 10) | rng.int(1024);
      bytes[blk * typeSize + off] = bits & 0xff;
      bytes[blk * typeSize + off + 1] = bits >> 8;
    }
  }
  return bytes;
}

describe('dequantize: live against gguf-py', () => {
  it('fresh random blocks of every supported type, and the type table', (t) => {
    if (ggufPython === undefined) {
      skipTest(t, 'llama', 'no Python with gguf and numpy (set MAGRPO_GGUF_PYTHON, or bash scripts/setup.sh --with-llama)');
      return;
    }
    const seed = Date.now() % 1_000_000_007;
    const rng = new Rng(seed);
    const cases = DEQUANTIZABLE_TYPES.map((type) => {
      const { blockSize } = GGML_TYPES[type];
      const nBlocks = blockSize === 1 ? 65536 : (64 * 256) / blockSize;
      const bytes = blockSize === 1 && type !== 0 ? new Uint8Array(new Uint16Array(65536).map((_, i) => i).buffer) : randomBlocks(rng, type, nBlocks);
      return { type, n: nBlocks * blockSize, bytes };
    });
    const r = spawnSync(ggufPython, ['-c', LIVE_SCRIPT], {
      input: JSON.stringify(cases.map((c) => ({ type: c.type, bytes: toBase64(c.bytes) }))),
      encoding: 'utf8',
      maxBuffer: 1 << 28,
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const live = JSON.parse(r.stdout) as { version: string; out: string[]; sizes: Record<string, [string, number, number]> };
    t.diagnostic(`gguf ${live.version} at ${ggufPython}, seed ${seed}`);
    for (const [i, c] of cases.entries()) {
      assertSameBits(dequantize(c.type, atOffset(c.bytes, 1), c.n), fromBase64(live.out[i]), `${ggmlTypeName(c.type)} (seed ${seed})`);
    }
    const ours = Object.fromEntries(Object.entries(GGML_TYPES).map(([id, x]) => [id, [x.name, x.blockSize, x.typeSize]]));
    assert.deepEqual(ours, live.sizes);
  });
});
