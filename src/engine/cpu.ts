/**
 * What CPU this is and which vector instructions it has, read from /proc/cpuinfo (Linux), so the
 * engine can pick the OpenBLAS kernels that fit it (blas-core.ts) and `magrpo doctor` can say what
 * it found. Parsing is a pure function of the text, so other machines' cpuinfo can be tested here.
 */
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';

/** The instruction-set features that decide which matrix kernels run fastest. */
export interface Isa {
  /** x86-64: 256-bit AVX2 with fused multiply-add. */
  avx2: boolean;
  fma: boolean;
  /** x86-64: AVX-512 foundation and the byte/word and vector-length extensions OpenBLAS needs. */
  avx512f: boolean;
  avx512bw: boolean;
  avx512vl: boolean;
  /** x86-64: AVX-512 bfloat16 dot products (Cooper Lake, Sapphire Rapids, Zen 4 and later). */
  avx512bf16: boolean;
  avx512vnni: boolean;
  /** arm64: 128-bit NEON (Advanced SIMD) and the scalable vector extensions. */
  asimd: boolean;
  sve: boolean;
  sve2: boolean;
}

export interface CpuInfo {
  arch: 'x64' | 'arm64' | string;
  /** `GenuineIntel`, `AuthenticAMD`, … on x86-64; the implementer code (`0x41` = Arm) on arm64. */
  vendor: string;
  /** x86-64 family and model as Linux prints them (decimal, extended fields included); arm64: part number. */
  family: number | null;
  model: number | null;
  modelName: string;
  /** Every feature word of the `flags` (x86-64) or `Features` (arm64) line, sorted. */
  flags: string[];
  isa: Isa;
  /** Logical CPUs this process may use. */
  logicalCpus: number;
}

/** The value of the first `key : value` line of a cpuinfo block, or undefined. */
function field(text: string, key: string): string | undefined {
  const re = new RegExp(`^${key}\\s*:\\s*(.*)$`, 'm');
  return text.match(re)?.[1]?.trim();
}

function num(s: string | undefined): number | null {
  if (s === undefined || s === '') return null;
  const n = s.startsWith('0x') ? Number.parseInt(s, 16) : Number(s);
  return Number.isFinite(n) ? n : null;
}

/**
 * Parses the text of /proc/cpuinfo. `arch` is `process.arch` of the machine that produced it; the
 * first processor block describes them all (Linux lists identical blocks on these machines).
 */
export function parseCpuInfo(text: string, arch: string, logicalCpus = 1): CpuInfo {
  const flagLine = field(text, 'flags') ?? field(text, 'Features') ?? '';
  const flags = [...new Set(flagLine.split(/\s+/).filter(Boolean))].sort();
  const has = (f: string) => flags.includes(f);
  const isa: Isa = {
    avx2: has('avx2'),
    fma: has('fma'),
    avx512f: has('avx512f'),
    avx512bw: has('avx512bw'),
    avx512vl: has('avx512vl'),
    avx512bf16: has('avx512_bf16'),
    avx512vnni: has('avx512_vnni'),
    asimd: has('asimd'),
    sve: has('sve'),
    sve2: has('sve2'),
  };
  if (arch === 'arm64') {
    return {
      arch,
      vendor: field(text, 'CPU implementer') ?? 'unknown',
      family: num(field(text, 'CPU architecture')),
      model: num(field(text, 'CPU part')),
      modelName: field(text, 'model name') ?? `arm64 part ${field(text, 'CPU part') ?? 'unknown'}`,
      flags,
      isa,
      logicalCpus,
    };
  }
  return {
    arch,
    vendor: field(text, 'vendor_id') ?? 'unknown',
    family: num(field(text, 'cpu family')),
    model: num(field(text, 'model')),
    modelName: field(text, 'model name') ?? 'unknown',
    flags,
    isa,
    logicalCpus,
  };
}

let cached: CpuInfo | null = null;

/** This machine's CPU; without /proc/cpuinfo (macOS) only the model name and count are known. */
export function cpuInfo(): CpuInfo {
  if (cached !== null) return cached;
  const text = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : `model name : ${cpus()[0]?.model ?? 'unknown'}\n`;
  cached = parseCpuInfo(text, process.arch, availableParallelism());
  return cached;
}

/** One line naming the vector ISA, e.g. `x86-64 AVX-512 (F BW VL) + BF16 + VNNI, AVX2+FMA`. */
export function isaSummary(cpu: CpuInfo): string {
  const { isa } = cpu;
  if (cpu.arch === 'arm64') {
    const parts = [isa.asimd ? 'NEON' : 'no NEON', ...(isa.sve2 ? ['SVE2'] : isa.sve ? ['SVE'] : [])];
    return `arm64 ${parts.join(' + ')}`;
  }
  if (cpu.arch !== 'x64') return cpu.arch;
  const parts: string[] = [];
  if (isa.avx512f) {
    const ext = [
      ['F', isa.avx512f],
      ['BW', isa.avx512bw],
      ['VL', isa.avx512vl],
    ]
      .filter(([, on]) => on)
      .map(([n]) => n);
    let s = `AVX-512 (${ext.join(' ')})`;
    if (isa.avx512bf16) s += ' + BF16';
    if (isa.avx512vnni) s += ' + VNNI';
    parts.push(s);
  }
  parts.push(isa.avx2 && isa.fma ? 'AVX2+FMA' : isa.avx2 ? 'AVX2 (no FMA)' : cpu.flags.includes('avx') ? 'AVX' : 'SSE only');
  return `x86-64 ${parts.join(', ')}`;
}

/** Full AVX-512 as OpenBLAS's SkylakeX kernels need it (F + BW + VL). */
export function hasAvx512(isa: Isa): boolean {
  return isa.avx512f && isa.avx512bw && isa.avx512vl;
}
