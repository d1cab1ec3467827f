/**
 * `magrpo doctor` as a user runs it: every field of the JSON report is there and consistent, and
 * the printed report has the lines the bench header shares. The slow-core warning is tested on a
 * made-up report (assessCores), since forcing a slow core would mean overriding the environment.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assessCores, type DoctorReport, formatDoctor } from '../../src/engine/doctor.js';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const doctor = (...args: string[]) => spawnSync(process.execPath, [...process.execArgv, main, 'doctor', ...args], { encoding: 'utf8' });

describe('magrpo doctor', () => {
  it('--json reports backend, CPU, BLAS library and core, threads, sgemm and the measured ceiling', () => {
    const r = doctor('--json', '--threads', '2');
    assert.equal(r.status, 0, r.stderr);
    const d = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(d.backend.native, 'ok');
    assert.match(d.backend.addon, /magrpo\.node$/);
    assert.ok(d.backend.kernels?.supported.includes(d.backend.kernels.isa), 'the C kernel variant in use is one the CPU runs');
    assert.equal(d.cpu.arch, process.arch);
    assert.ok(d.cpu.isa.length > 0);
    // The bf16 kernel named is AMX where /proc/cpuinfo lists its flags (Linux lets a process use
    // tiles since 5.16), else VDPBF16PS or emulation. The test process itself loads no addon: that
    // would choose an OPENBLAS_CORETYPE that the child then reports as the user's.
    const flags = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
    if (/\bamx_bf16\b/.test(flags) && /\bamx_tile\b/.test(flags) && !process.env.MAGRPO_BF16_KERNEL) assert.equal(d.backend.bf16, 'amx');
    else assert.ok(['avx512-bf16', 'emulated', 'amx'].includes(d.backend.bf16 ?? ''), `bf16 kernel ${d.backend.bf16}`);
    const sandbox = d.extra.find((e) => e.label === 'sandbox');
    assert.match(sandbox?.value ?? '', /^(bwrap|unshare|rlimits-only) \(/, 'the sandbox isolation level is reported');
    assert.ok(d.blas.core !== null, 'the core OpenBLAS runs is known');
    assert.ok(d.blas.library !== null && /blas/.test(d.blas.library));
    // A user's OPENBLAS_CORETYPE is reported as theirs and unchanged; otherwise magrpo's choice is named.
    const user = process.env.OPENBLAS_CORETYPE;
    if (user !== undefined) assert.deepEqual([d.blas.coretypeSetBy, d.blas.coretype], ['user', user]);
    else assert.ok(d.blas.coretypeSetBy === 'none' || d.blas.coretypeSetBy === 'magrpo');
    assert.ok(d.blas.selection.length > 0);
    assert.deepEqual(
      d.sgemm.map((s) => [s.shape, s.threads]),
      [
        ['1024x1024x1024', 1],
        ['1024x1024x1024', 2],
      ],
    );
    for (const s of d.sgemm) assert.ok(s.gflops > 0);
    const inUse = d.cores.filter((c) => c.inUse);
    assert.equal(inUse.length, 1, 'exactly one core row is the one in use');
    assert.equal(inUse[0].core.toLowerCase(), d.blas.core.toLowerCase());
    assert.ok(d.cores.some((c) => c.openblasDefault));
    assert.ok(d.peakPerCore.gflops > 0);
    assert.ok(d.fmaPeak !== null && d.fmaPeak.gflops > 0, 'the FMA-loop peak is measured');
    assert.equal(d.fmaPeak.isa, d.backend.kernels?.supported.at(-1), 'in the widest vectors this CPU runs');
    assert.equal(d.peakPerCore.gflops, Math.max(...d.cores.filter((c) => c.accepted && c.correct).map((c) => c.gflops)));
    assert.ok(d.fractionOfBest !== null && d.fractionOfBest > 0 && d.fractionOfBest <= 1);
  });

  it('prints aligned lines (and the bench header shares them)', () => {
    const r = doctor('--quick');
    assert.equal(r.status, 0, r.stderr);
    for (const label of [
      'backend:',
      'CPU:',
      'ISA:',
      'C kernels:',
      'bf16 products:',
      'BLAS:',
      'BLAS core:',
      'core choice:',
      'threads:',
      'load:',
      'sgemm 1 thr:',
    ])
      assert.match(r.stdout, new RegExp(`^${label}`, 'm'));
    assert.doesNotMatch(r.stdout, /OpenBLAS core types here/, '--quick tries no other cores');
  });
});

describe('assessCores', () => {
  const report = (coretype: string | null, setBy: 'user' | 'magrpo' | 'none'): DoctorReport => ({
    backend: {
      selected: 'native',
      native: 'ok',
      addon: '/x/magrpo.node',
      threads: 2,
      kernels: { isa: 'avx512', supported: ['generic', 'avx2', 'avx512'] },
      gemm: null,
      bf16: 'emulated',
    },
    cpu: { model: 'Xeon', vendor: 'GenuineIntel', family: 6, modelNumber: 143, arch: 'x64', logicalCpus: 2, isa: 'x86-64 AVX-512' },
    blas: { library: '/lib/libopenblas.so', version: '0.3.21', core: 'Prescott', coretype, coretypeSetBy: setBy, selection: '' },
    threads: { backend: 2, logicalCpus: 2, env: {} },
    loadAverage: [0.5, 0.4, 0.3],
    fmaPeak: null,
    sgemm: [{ shape: '1024x1024x1024', threads: 1, gflops: 32 }],
    cores: [
      { core: 'Prescott', accepted: true, correct: true, gflops: 32, inUse: true, openblasDefault: true },
      { core: 'SkylakeX', accepted: true, correct: true, gflops: 134, inUse: false, openblasDefault: false },
      { core: 'Cooperlake', accepted: false, correct: true, gflops: 0, inUse: false, openblasDefault: false },
      { core: 'Bogus', accepted: true, correct: false, gflops: 500, inUse: false, openblasDefault: false },
    ],
    peakPerCore: { gflops: 0, core: null, method: '' },
    fractionOfBest: null,
    warnings: [],
    extra: [],
  });

  it('below 70% of the best core: a warning naming the fix; wrong-result cores do not count as the best', () => {
    const a = assessCores(report(null, 'none'));
    assert.equal(a.peakPerCore.core, 'SkylakeX');
    assert.equal(a.peakPerCore.gflops, 134);
    assert.ok(Math.abs((a.fractionOfBest ?? 0) - 32 / 134) < 1e-12);
    assert.equal(a.warnings.length, 1);
    assert.match(a.warnings[0], /matmul runs at 24% of what core SkylakeX gives here \(core in use: Prescott\)\. Fix: set OPENBLAS_CORETYPE=SkylakeX/);
  });

  it("when the user's OPENBLAS_CORETYPE is the slow one, the fix says to unset or change it", () => {
    const a = assessCores(report('Prescott', 'user'));
    assert.match(a.warnings[0], /OPENBLAS_CORETYPE=Prescott is set in your environment; unset it .* or set OPENBLAS_CORETYPE=SkylakeX/);
  });

  it('at 70% or more, no warning; the printer shows the core table and the extra lines', () => {
    const r = report(null, 'none');
    r.cores[0].gflops = 120;
    r.extra.push({ label: 'sandbox', value: 'namespaces' });
    const a = assessCores(r);
    assert.deepEqual(a.warnings, []);
    const text = formatDoctor({ ...r, ...a }).join('\n');
    assert.match(text, /^sandbox:\s+namespaces$/m);
    assert.match(text, /Prescott\s+120\.0 GFLOP\/s {2}in use, OpenBLAS's own choice/);
    assert.match(text, /Cooperlake\s+-\s+name not accepted/);
    assert.match(text, /Bogus\s+500\.0 GFLOP\/s {2}WRONG RESULTS/);
  });
});
