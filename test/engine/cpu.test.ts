/** CPU and ISA detection from /proc/cpuinfo texts of the machines magrpo runs on (test/fixtures/cpuinfo, trimmed). */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { rankedCores } from '../../src/engine/blas-core.js';
import { cpuInfo, hasAvx512, isaSummary, parseCpuInfo } from '../../src/engine/cpu.js';

const sample = (name: string, arch = 'x64') =>
  parseCpuInfo(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'cpuinfo', `${name}.txt`), 'utf8'), arch, 2);

describe('parseCpuInfo', () => {
  it('Sapphire Rapids: Intel family 6 model 143, AVX-512 with BF16', () => {
    const c = sample('sapphire-rapids');
    assert.equal(c.vendor, 'GenuineIntel');
    assert.equal(c.family, 6);
    assert.equal(c.model, 143);
    assert.equal(c.modelName, 'Intel(R) Xeon(R) Platinum 8488C');
    assert.deepEqual(
      { avx2: c.isa.avx2, fma: c.isa.fma, f: c.isa.avx512f, bw: c.isa.avx512bw, vl: c.isa.avx512vl, bf16: c.isa.avx512bf16, sve: c.isa.sve },
      { avx2: true, fma: true, f: true, bw: true, vl: true, bf16: true, sve: false },
    );
    assert.ok(hasAvx512(c.isa));
    assert.equal(isaSummary(c), 'x86-64 AVX-512 (F BW VL) + BF16 + VNNI, AVX2+FMA');
    assert.ok(c.flags.includes('amx_bf16'));
    assert.equal(new Set(c.flags).size, c.flags.length, 'each flag once');
  });

  it('Zen 3: AMD family 25, AVX2+FMA and no AVX-512', () => {
    const c = sample('zen3');
    assert.equal(c.vendor, 'AuthenticAMD');
    assert.equal(c.family, 25);
    assert.equal(c.model, 1);
    assert.equal(c.isa.avx2 && c.isa.fma, true);
    assert.equal(c.isa.avx512f, false);
    assert.equal(hasAvx512(c.isa), false);
    assert.equal(isaSummary(c), 'x86-64 AVX2+FMA');
  });

  it('Zen 5: AMD family 26, AVX-512 with BF16', () => {
    const c = sample('zen5');
    assert.equal(c.family, 26);
    assert.equal(c.model, 2);
    assert.ok(hasAvx512(c.isa) && c.isa.avx512bf16 && c.isa.avx512vnni);
  });

  it('arm64 (Graviton 3): implementer, part number, NEON and SVE from the Features line', () => {
    const c = sample('graviton3', 'arm64');
    assert.equal(c.vendor, '0x41');
    assert.equal(c.model, 0xd40);
    assert.equal(c.family, 8);
    assert.equal(c.isa.asimd, true);
    assert.equal(c.isa.sve, true);
    assert.equal(c.isa.sve2, false);
    assert.equal(c.isa.avx2, false);
    assert.equal(isaSummary(c), 'arm64 NEON + SVE');
  });

  it('an empty text gives an unknown CPU with no features, not an error', () => {
    const c = parseCpuInfo('', 'x64');
    assert.equal(c.vendor, 'unknown');
    assert.equal(c.family, null);
    assert.deepEqual(c.flags, []);
    assert.equal(isaSummary(c), 'x86-64 SSE only');
  });

  it('reads this machine', () => {
    const c = cpuInfo();
    assert.equal(c.arch, process.arch);
    assert.ok(c.logicalCpus >= 1);
  });
});

describe('rankedCores', () => {
  it('lists the OpenBLAS core types that suit each ISA, best first', () => {
    assert.deepEqual(rankedCores(sample('sapphire-rapids')), ['Cooperlake', 'SkylakeX', 'Haswell', 'Zen', 'Sandybridge']);
    assert.deepEqual(rankedCores(sample('zen5')), ['Cooperlake', 'SkylakeX', 'Zen', 'Haswell', 'Sandybridge']);
    assert.deepEqual(rankedCores(sample('zen3')), ['Zen', 'Haswell', 'Sandybridge']);
    assert.deepEqual(rankedCores(sample('graviton3', 'arm64')), ['neoversev1', 'neoversen2', 'neoversen1', 'armv8']);
    assert.deepEqual(rankedCores(parseCpuInfo('', 'x64')), []);
  });
});
