import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CheckpointError, type CheckpointErrorCode } from '../../src/model/errors.js';
import {
  bf16ToF32,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  readSafetensors,
  readSafetensorsHeader,
  readShardedSafetensors,
  writeSafetensors,
} from '../../src/model/safetensors.js';

const root = mkdtempSync(join(tmpdir(), 'magrpo-safetensors-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const fresh = (name = 'model.safetensors') => join(mkdtempSync(join(root, `case${counter++}-`)), name);

const f32FromBits = (...bits: number[]) => new Float32Array(new Uint32Array(bits).buffer);
const bitsOfF32 = (a: Float32Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length)];

/** Builds a safetensors file by hand so malformed headers can be tested. */
function rawFile(file: string, header: unknown, data: Uint8Array = new Uint8Array(0)): string {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const out = Buffer.alloc(8 + json.length + data.length);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  json.copy(out, 8);
  out.set(data, 8 + json.length);
  writeFileSync(file, out);
  return file;
}

function expectError(fn: () => unknown, code: CheckpointErrorCode, file: string, ...fragments: string[]): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof CheckpointError, `expected CheckpointError, got ${err}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.file, file);
    assert.ok(err.message.startsWith(`${file}: `), err.message);
    assert.ok(err.message.includes(' — '), `message should say what to do: ${err.message}`);
    for (const f of fragments) assert.ok(err.message.includes(f), `"${err.message}" lacks "${f}"`);
    return true;
  });
}

describe('dtype conversions', () => {
  test('f32 -> f16 rounds to nearest even and handles overflow, subnormals, inf, nan', () => {
    const cases: [number, number][] = [
      [1, 0x3c00],
      [-2, 0xc000],
      [65504, 0x7bff], // largest finite
      [65519.99, 0x7bff], // just below the rounding midpoint to inf
      [65520, 0x7c00], // midpoint: ties to even = inf
      [1 + 2 ** -11, 0x3c00], // tie -> even (down)
      [1 + 3 * 2 ** -11, 0x3c02], // tie -> even (up)
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // above the tie
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -14 - 2 ** -24, 0x03ff], // largest subnormal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // tie between 0 and 2^-24 -> even (0)
      [1.5 * 2 ** -25, 0x0001],
      [3 * 2 ** -25, 0x0002], // tie between 1 and 2 ulps -> even
      [1e-10, 0x0000],
      [-0, 0x8000],
      [Number.POSITIVE_INFINITY, 0x7c00],
      [Number.NEGATIVE_INFINITY, 0xfc00],
      [Number.NaN, 0x7e00],
    ];
    const got = f32ToF16(new Float32Array(cases.map(([v]) => v)));
    assert.deepEqual(
      [...got].map((b) => b.toString(16)),
      cases.map(([, b]) => b.toString(16)),
    );
  });

  test('f16 -> f32 is exact for subnormals, extremes, inf and nan', () => {
    const got = f16ToF32(new Uint16Array([0x0001, 0x03ff, 0x8001, 0x0400, 0x3555, 0x7bff, 0x8000, 0x7c00, 0xfc00, 0x7e00]));
    assert.deepEqual([...got.slice(0, 9)], [2 ** -24, 1023 * 2 ** -24, -(2 ** -24), 2 ** -14, 0.333251953125, 65504, -0, Infinity, -Infinity]);
    assert.ok(Object.is(got[6], -0));
    assert.ok(Number.isNaN(got[9]));
  });

  test('every f16 bit pattern survives f16 -> f32 -> f16', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = f32ToF16(f16ToF32(all));
    for (let i = 0; i < 65536; i++) {
      const nan16 = (i & 0x7c00) === 0x7c00 && (i & 0x3ff) !== 0;
      if (nan16) assert.equal(back[i] & 0x7e00, 0x7e00, `nan ${i.toString(16)} stays a quiet nan`);
      else if (back[i] !== i) assert.fail(`f16 ${i.toString(16)} came back as ${back[i].toString(16)}`);
    }
  });

  test('f32 -> bf16 rounds to nearest even; nan stays nan', () => {
    const input = f32FromBits(0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x7f7fffff, 0xff800000, 0x80000000, 0x00000001, 0x7fc00000, 0x7f800001);
    const got = [...f32ToBf16(input)].map((b) => b.toString(16));
    // 1.0, tie->down, tie->up, above tie, max f32 -> inf, -inf, -0, tiny -> 0, nan, signalling nan -> quiet (not inf)
    assert.deepEqual(got, ['3f80', '3f80', '3f82', '3f81', '7f80', 'ff80', '8000', '0', '7fc0', '7fc0']);
  });

  test('bf16 -> f32 shifts bits into the high half', () => {
    const got = bf16ToF32(new Uint16Array([0x3f80, 0xc040, 0x0001, 0xff80, 0x7fc0]));
    assert.deepEqual(bitsOfF32(got), [0x3f800000, 0xc0400000, 0x00010000, 0xff800000, 0x7fc00000]);
  });

  test('conversions respect a subarray view offset', () => {
    const backing = new Float32Array([7, 1, 2]);
    assert.deepEqual([...f32ToBf16(backing.subarray(1))], [0x3f80, 0x4000]);
    assert.deepEqual([...f32ToF16(backing.subarray(1))], [0x3c00, 0x4000]);
  });
});

describe('agreement with PyTorch-written checkpoints', () => {
  const fixtures = join(import.meta.dirname, '..', 'fixtures', 'models');

  /** The raw 16-bit patterns of every tensor in a file, keyed by name. */
  function rawBits(file: string): Map<string, Uint16Array> {
    const bytes = readFileSync(file);
    const out = new Map<string, Uint16Array>();
    for (const [name, { offset, byteLength }] of readSafetensorsHeader(file).tensors) {
      out.set(name, new Uint16Array(bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + byteLength)));
    }
    return out;
  }

  for (const [variant, convert] of [
    ['fp16', f32ToF16],
    ['bf16', f32ToBf16],
  ] as const) {
    test(`f32 -> ${variant} matches torch's .to(${variant}) bit for bit on the tiny-llama weights`, () => {
      const reference = readSafetensors(join(fixtures, 'tiny-llama', 'model.safetensors'));
      let rounded = 0;
      for (const [name, bits] of rawBits(join(fixtures, `tiny-llama-${variant}`, 'model.safetensors'))) {
        const f32 = reference.get(name)?.data as Float32Array;
        const mine = convert(f32);
        assert.deepEqual(mine, bits, name);
        const widened = variant === 'fp16' ? f16ToF32(mine) : bf16ToF32(mine);
        rounded += f32.filter((v, i) => v !== widened[i]).length;
      }
      assert.ok(rounded > 1000, `only ${rounded} values needed rounding: the comparison would prove little`);
    });
  }
});

describe('writeSafetensors / readSafetensors', () => {
  test('F32 and I32 round trip bit-identically, keys sorted, header 8-byte aligned', () => {
    const file = fresh();
    const weird = f32FromBits(0x7fc00123, 0x80000000, 0x00000001, 0x7f7fffff, 0xff800000);
    const random = new Float32Array(1000).map(() => (Math.random() - 0.5) * 1e3);
    writeSafetensors(
      file,
      {
        'z.weight': { dtype: 'F32', shape: [5], data: weird },
        'a.weight': { dtype: 'F32', shape: [10, 100], data: random },
        '10': { dtype: 'I32', shape: [2, 2], data: new Int32Array([-2147483648, 2147483647, 0, -1]) },
        empty: { dtype: 'F32', shape: [0, 3], data: new Float32Array(0) },
      },
      { format: 'pt' },
    );
    const bytes = readFileSync(file);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    assert.equal((8 + headerLength) % 8, 0);
    const headerText = bytes.subarray(8, 8 + headerLength).toString('utf8');
    assert.match(headerText, /^\{"__metadata__":\{"format":"pt"\},"10":.*"a\.weight":.*"empty":.*"z\.weight":.*\} *$/);

    const back = readSafetensors(file);
    assert.deepEqual([...back.keys()], ['10', 'a.weight', 'empty', 'z.weight']);
    assert.deepEqual(bitsOfF32(back.get('z.weight')!.data as Float32Array), bitsOfF32(weird));
    assert.deepEqual(back.get('a.weight')!.data, random);
    assert.deepEqual(back.get('a.weight')!.shape, [10, 100]);
    assert.deepEqual(back.get('10'), { dtype: 'I32', shape: [2, 2], data: new Int32Array([-2147483648, 2147483647, 0, -1]) });
    assert.deepEqual(back.get('empty'), { dtype: 'F32', shape: [0, 3], data: new Float32Array(0) });
    assert.deepEqual(readSafetensorsHeader(file).metadata, { format: 'pt' });
  });

  test('F16 and BF16 are stored as rounded 16-bit patterns and read back widened', () => {
    const file = fresh();
    const values = new Float32Array([1 + 3 * 2 ** -11, 2 ** -24, 65520, 1 + 3 * 2 ** -8]);
    writeSafetensors(file, { h: { dtype: 'F16', shape: [4], data: values }, b: { dtype: 'BF16', shape: [2, 2], data: values } });
    const header = readSafetensorsHeader(file);
    const raw = readFileSync(file);
    const u16 = (name: string) => {
      const { offset, byteLength } = header.tensors.get(name)!;
      return [...new Uint16Array(raw.buffer.slice(raw.byteOffset + offset, raw.byteOffset + offset + byteLength))];
    };
    assert.deepEqual(u16('h'), [0x3c02, 0x0001, 0x7c00, 0x3c0c]);
    assert.deepEqual(u16('b'), [0x3f80, 0x3380, 0x4780, 0x3f82]);
    const back = readSafetensors(file);
    assert.equal(back.get('h')!.dtype, 'F16');
    assert.deepEqual([...back.get('h')!.data], [1 + 2 ** -9, 2 ** -24, Infinity, 1 + 3 * 2 ** -8]);
    assert.deepEqual([...back.get('b')!.data], [1, 2 ** -24, 65536, 1 + 2 ** -6]);
  });

  test('reads F64, I64, I16, I8, U8 and BOOL written by another tool', () => {
    const file = fresh();
    const f64 = new Float64Array([0.1, -3]);
    const i64 = new BigInt64Array([-5n, 2147483647n]);
    const data = Buffer.concat([
      Buffer.from(f64.buffer),
      Buffer.from(i64.buffer),
      Buffer.from(new Int16Array([-300, 7]).buffer),
      Buffer.from([0xff, 1, 200, 1, 0]),
    ]);
    rawFile(
      file,
      {
        d: { dtype: 'F64', shape: [2], data_offsets: [0, 16] },
        l: { dtype: 'I64', shape: [2], data_offsets: [16, 32] },
        s: { dtype: 'I16', shape: [2], data_offsets: [32, 36] },
        c: { dtype: 'I8', shape: [2], data_offsets: [36, 38] },
        u: { dtype: 'U8', shape: [1], data_offsets: [38, 39] },
        m: { dtype: 'BOOL', shape: [2], data_offsets: [39, 41] },
      },
      data,
    );
    const t = readSafetensors(file);
    assert.deepEqual(t.get('d'), { dtype: 'F64', shape: [2], data: new Float32Array([0.1, -3]) });
    assert.deepEqual(t.get('l')!.data, new Int32Array([-5, 2147483647]));
    assert.deepEqual(t.get('s')!.data, new Int32Array([-300, 7]));
    assert.deepEqual(t.get('c')!.data, new Int32Array([-1, 1]));
    assert.deepEqual(t.get('u')!.data, new Int32Array([200]));
    assert.deepEqual(t.get('m')!.data, new Int32Array([1, 0]));
  });

  test('I64 values beyond int32 are refused, naming the tensor', () => {
    const file = rawFile(fresh(), { ids: { dtype: 'I64', shape: [2], data_offsets: [0, 16] } }, Buffer.from(new BigInt64Array([1n, 2n ** 31n]).buffer));
    expectError(() => readSafetensors(file), 'UNSUPPORTED_DTYPE', file, '"ids"', '2147483648');
  });

  test('unsupported dtype names the tensor and the dtype', () => {
    const file = rawFile(fresh(), { q: { dtype: 'F8_E4M3', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1));
    expectError(() => readSafetensorsHeader(file), 'UNSUPPORTED_DTYPE', file, '"q"', 'F8_E4M3');
  });
});

describe('validation', () => {
  const oneTensor = (file: string) => {
    writeSafetensors(file, { w: { dtype: 'F32', shape: [4], data: new Float32Array([1, 2, 3, 4]) } });
    return file;
  };

  test('missing file', () => {
    const file = join(root, 'nope.safetensors');
    expectError(() => readSafetensors(file), 'FILE_MISSING', file);
  });

  test('truncated data is detected from the header alone', () => {
    const file = oneTensor(fresh());
    const bytes = readFileSync(file);
    writeFileSync(file, bytes.subarray(0, bytes.length - 1));
    expectError(() => readSafetensorsHeader(file), 'TRUNCATED', file, `${bytes.length - 1}`);
    expectError(() => readSafetensors(file), 'TRUNCATED', file);
  });

  test('truncated inside the header and shorter than the length prefix', () => {
    const file = oneTensor(fresh());
    writeFileSync(file, readFileSync(file).subarray(0, 20));
    expectError(() => readSafetensors(file), 'TRUNCATED', file, 'header needs');
    writeFileSync(file, Buffer.from([1, 2, 3]));
    expectError(() => readSafetensors(file), 'TRUNCATED', file, '3 bytes');
  });

  test('corrupt header: bad JSON, not an object, absurd length, bad metadata, bad shape', () => {
    const file = fresh();
    expectError(() => readSafetensors(rawFile(file, '{"w": {"dtype": "F32",')), 'CORRUPT', file, 'not valid UTF-8 JSON');
    expectError(() => readSafetensors(rawFile(file, '[1, 2]')), 'CORRUPT', file, 'not a JSON object');
    const huge = Buffer.alloc(16);
    huge.writeBigUInt64LE(2n ** 40n, 0);
    writeFileSync(file, huge);
    expectError(() => readSafetensors(file), 'CORRUPT', file, 'not a safetensors file');
    expectError(() => readSafetensors(rawFile(file, { __metadata__: { a: 1 } })), 'CORRUPT', file, '__metadata__');
    expectError(() => readSafetensors(rawFile(file, { w: { dtype: 'F32', shape: [-1], data_offsets: [0, 0] } })), 'CORRUPT', file, '"w"', 'shape');
    expectError(() => readSafetensors(rawFile(file, { w: { dtype: 'F32', shape: [1] } })), 'CORRUPT', file, '"w"', 'data_offsets');
  });

  test('offsets: size mismatch, gap, overlap, trailing bytes', () => {
    const file = fresh();
    const data = new Uint8Array(16);
    expectError(() => readSafetensors(rawFile(file, { w: { dtype: 'F32', shape: [3], data_offsets: [0, 16] } }, data)), 'CORRUPT', file, '"w"', 'needs 12');
    expectError(
      () =>
        readSafetensors(rawFile(file, { a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, data)),
      'CORRUPT',
      file,
      '"b"',
      'gap',
    );
    expectError(
      () =>
        readSafetensors(
          rawFile(file, { a: { dtype: 'F32', shape: [3], data_offsets: [0, 12] }, b: { dtype: 'F32', shape: [2], data_offsets: [8, 16] } }, data),
        ),
      'CORRUPT',
      file,
      '"b"',
      'overlaps',
    );
    expectError(
      () => readSafetensors(rawFile(file, { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, data)),
      'CORRUPT',
      file,
      '8 bytes after the last tensor',
    );
  });

  test('header-only read reports offsets without loading data', () => {
    const file = fresh();
    writeSafetensors(file, { b: { dtype: 'BF16', shape: [3], data: new Float32Array(3) }, a: { dtype: 'F32', shape: [2, 1], data: new Float32Array(2) } });
    const { tensors } = readSafetensorsHeader(file);
    const a = tensors.get('a')!;
    const b = tensors.get('b')!;
    assert.deepEqual([a.dtype, a.shape, a.byteLength, b.dtype, b.byteLength, b.offset - a.offset], ['F32', [2, 1], 8, 'BF16', 6, 8]);
    assert.equal(b.offset + b.byteLength, readFileSync(file).length);
  });
});

describe('atomic write', () => {
  test('a tensor that fails mid-write leaves the old file intact and no temp file', () => {
    const file = fresh();
    writeSafetensors(file, { old: { dtype: 'F32', shape: [1], data: new Float32Array([42]) } });
    const before = readFileSync(file);
    expectError(
      () =>
        writeSafetensors(file, {
          a: { dtype: 'F32', shape: [1000], data: new Float32Array(1000) }, // written first
          b: { dtype: 'F32', shape: [2, 3], data: new Float32Array(5) },
        }),
      'SHAPE_MISMATCH',
      file,
      '"b"',
      'needs 6 values but data has 5',
    );
    assert.deepEqual(readFileSync(file), before);
    const dir = join(file, '..');
    assert.deepEqual(readdirSync(dir), ['model.safetensors']);
  });

  test('wrong typed array or dtype is refused before anything lands', () => {
    const file = fresh();
    expectError(() => writeSafetensors(file, { w: { dtype: 'I32', shape: [1], data: new Float32Array(1) } as never }), 'SHAPE_MISMATCH', file, 'Int32Array');
    expectError(
      () => writeSafetensors(file, { w: { dtype: 'F64', shape: [1], data: new Float32Array(1) } as never }),
      'SHAPE_MISMATCH',
      file,
      'cannot write dtype F64',
    );
    assert.equal(existsSync(file), false);
    assert.deepEqual(readdirSync(join(file, '..')), []);
  });
});

describe('readShardedSafetensors', () => {
  const shardedDir = () => mkdtempSync(join(root, 'sharded-'));

  function writeSharded(dir: string) {
    writeSafetensors(join(dir, 'model-00001-of-00002.safetensors'), { 'a.weight': { dtype: 'F32', shape: [2], data: new Float32Array([1, 2]) } });
    writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), { 'b.weight': { dtype: 'BF16', shape: [1], data: new Float32Array([3]) } });
    const index = {
      metadata: { total_size: 10 },
      weight_map: { 'a.weight': 'model-00001-of-00002.safetensors', 'b.weight': 'model-00002-of-00002.safetensors' },
    };
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
    return index;
  }

  test('merges shards listed in the index', () => {
    const dir = shardedDir();
    writeSharded(dir);
    const t = readShardedSafetensors(dir);
    assert.deepEqual([...t.keys()].sort(), ['a.weight', 'b.weight']);
    assert.deepEqual([...t.get('b.weight')!.data], [3]);
  });

  test('single model.safetensors wins', () => {
    const dir = shardedDir();
    writeSafetensors(join(dir, 'model.safetensors'), { only: { dtype: 'F32', shape: [1], data: new Float32Array([9]) } });
    assert.deepEqual([...readShardedSafetensors(dir).keys()], ['only']);
  });

  test('a missing shard names the shard and the index', () => {
    const dir = shardedDir();
    writeSharded(dir);
    const shard = join(dir, 'model-00002-of-00002.safetensors');
    rmSync(shard);
    expectError(() => readShardedSafetensors(dir), 'FILE_MISSING', shard, join(dir, 'model.safetensors.index.json'));
  });

  test('a tensor listed in the index but absent from its shard', () => {
    const dir = shardedDir();
    const index = writeSharded(dir);
    (index.weight_map as Record<string, string>)['c.weight'] = 'model-00001-of-00002.safetensors';
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
    expectError(() => readShardedSafetensors(dir), 'MISSING_TENSOR', join(dir, 'model-00001-of-00002.safetensors'), '"c.weight"');
  });

  test('shard names may not escape the folder', () => {
    const dir = shardedDir();
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: '../x.safetensors' } }));
    expectError(() => readShardedSafetensors(dir), 'CORRUPT', join(dir, 'model.safetensors.index.json'), 'weight_map');
  });

  test('no weights at all', () => {
    const dir = shardedDir();
    writeFileSync(join(dir, 'pytorch_model.bin'), '');
    expectError(() => readShardedSafetensors(dir), 'FILE_MISSING', join(dir, 'model.safetensors'), 'pytorch_model.bin');
  });
});
