/**
 * The kernel interface. Every numeric loop of the engine lives behind it, in two implementations:
 * `reference` (plain TypeScript, readable, the oracle in tests) and `native` (a C addon calling
 * OpenBLAS `cblas_sgemm`, with C loops for the rest).
 *
 * Conventions, shared by every kernel:
 * - Buffers are row-major and dense unless a leading dimension (`ld*`) or stride says otherwise.
 * - `*Off` arguments are element offsets into the buffer, so views need no copies.
 * - Kernels named `...Backward` ACCUMULATE into their gradient outputs (`+=`), because a tensor
 *   used twice in a graph receives the sum of both gradients. Forward kernels OVERWRITE `out`.
 * - The native backend accepts Float32Array only; the reference backend also runs on Float64Array
 *   (used by the finite-difference gradient tests).
 *
 * Composite ops (GELU-as-formula, attention, RoPE tables, cross-entropy...) are written once above
 * this interface in `ops.ts`; adding one must not touch a backend.
 */

/** Matrix-product precision (Backend.setPrecision). */
export type Precision = 'fp32' | 'bf16' | 'bf16-emulated';

/** Products with fewer rows than this stay fp32 under `bf16` (native/magrpo.h BF16_MIN_ROWS). */
export const BF16_MIN_ROWS = 16;

export type FloatArray = Float32Array | Float64Array;

export type BinaryOp = 'add' | 'sub' | 'mul' | 'div';
/** Elementwise unary ops. `gelu` is the tanh approximation (GPT-2 "gelu_new"). */
export type UnaryOp = 'gelu' | 'silu' | 'relu' | 'exp' | 'log' | 'tanh' | 'neg' | 'sqrt' | 'square';

export const BINARY_OPS: readonly BinaryOp[] = ['add', 'sub', 'mul', 'div'];
export const UNARY_OPS: readonly UnaryOp[] = ['gelu', 'silu', 'relu', 'exp', 'log', 'tanh', 'neg', 'sqrt', 'square'];

/** The arguments of one `gemm` call, in its order. */
export type GemmArgs = [
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: FloatArray,
  offA: number,
  lda: number,
  B: FloatArray,
  offB: number,
  ldb: number,
  beta: number,
  C: FloatArray,
  offC: number,
  ldc: number,
];

export interface Backend {
  readonly name: 'native' | 'reference';

  /** Threads used by matrix products and parallel loops. */
  setNumThreads(n: number): void;
  getNumThreads(): number;

  /**
   * Precision of matrix products: `fp32`, or `bf16` (inputs rounded to bfloat16, fp32
   * accumulation and output) for every product of at least BF16_MIN_ROWS rows, and every product
   * inside attention over at least BF16_MIN_ROWS query rows; fewer rows (decoding) stay fp32. `bf16-emulated` rounds the same way but multiplies in fp32 (the path of
   * CPUs without AVX-512 BF16, forced; for tests).
   */
  setPrecision(p: Precision): void;
  getPrecision(): Precision;

  /**
   * C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C, row-major.
   * op(X) = Xᵀ when `trans*` is true. lda/ldb/ldc are the row strides of A, B, C as stored
   * (A is stored [M,K] or, transposed, [K,M]). beta = 0 means C is overwritten (NaNs in C ignored).
   */
  gemm(...args: GemmArgs): void;

  /**
   * Two independent products: the first gemm's arguments, then the second's (a matmul backward's
   * dA and dB). The native backend runs them at once, one per thread, when it has exactly two
   * (small products scale poorly over two BLAS threads); each output is what `gemm` alone would
   * write, and outputs that overlap are written one after the other.
   */
  gemmPair(...args: [...GemmArgs, ...GemmArgs]): void;

  /**
   * Floats of a buffer that holds op(B) [K, N] packed by `packB` (engine/packed.ts); a `bf16` pack
   * holds bf16 values (two per float of the buffer on the native backend).
   */
  packedFloats(N: number, K: number, bf16?: boolean): number;

  /**
   * Packs op(B) (B stored [N, K] when `transB`, else [K, N], row stride ldb) into `packed`, in the
   * layout `gemmPrepacked` reads (the native sgemm's panels; the reference keeps op(B) dense).
   */
  packB(transB: boolean, N: number, K: number, B: FloatArray, offB: number, ldb: number, packed: FloatArray, bf16?: boolean): void;

  /**
   * C[M,N] = alpha · A[M,K] · op(B) + beta · C, with op(B) packed by `packB`. With `bf16` (the pack
   * must be one) A is rounded to bf16 too and sums are fp32: precision bf16's product, whatever M.
   */
  gemmPrepacked(
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: FloatArray,
    offA: number,
    lda: number,
    packed: FloatArray,
    beta: number,
    C: FloatArray,
    offC: number,
    ldc: number,
    bf16?: boolean,
  ): void;

  /**
   * out[i] = a[ia] op b[ib] over `shape` (rank ≤ 8), with `aStrides`/`bStrides` in elements;
   * a stride of 0 broadcasts. `out` is dense of `shape`.
   */
  binary(op: BinaryOp, shape: readonly number[], a: FloatArray, aStrides: readonly number[], b: FloatArray, bStrides: readonly number[], out: FloatArray): void;

  /** out[i] = f(x[i]) for i < n. */
  unary(op: UnaryOp, n: number, x: FloatArray, out: FloatArray): void;
  /** gx[i] += gy[i] · f'(x[i]) for i < n (x is the forward INPUT). */
  unaryBackward(op: UnaryOp, n: number, x: FloatArray, gy: FloatArray, gx: FloatArray): void;

  /** y[i] += alpha · x[i] for i < n. */
  axpy(n: number, alpha: number, x: FloatArray, y: FloatArray): void;
  /** x[i] *= alpha for i < n. */
  scale(n: number, alpha: number, x: FloatArray): void;
  /** Σ x[i]² over i < n, accumulated in double precision. */
  sumSquares(n: number, x: FloatArray): number;

  /**
   * Sum over the middle axis of x viewed as [outer, len, inner]:
   * out[o, j] (+)= Σ_l x[o, l, j]. Overwrites when `accumulate` is false.
   */
  reduceSum(outer: number, len: number, inner: number, x: FloatArray, out: FloatArray, accumulate: boolean): void;

  /**
   * Softmax of each row of x viewed as [rows, cols], with an optional causal limit and key mask.
   * Row r may see column c only when c ≤ rowPos0 + r (if `causal`) and keyMask[kmOff + c] ≠ 0
   * (if keyMask is given). Masked entries get probability 0; a row with no visible column is all 0.
   * `scale` multiplies x before the softmax.
   */
  softmax(
    rows: number,
    cols: number,
    x: FloatArray,
    xOff: number,
    out: FloatArray,
    outOff: number,
    scale: number,
    causal: boolean,
    rowPos0: number,
    keyMask: Uint8Array | null,
    kmOff: number,
  ): void;
  /** gx[r,c] += scale · y[r,c] · (gy[r,c] − Σ_c' gy[r,c']·y[r,c']), y the softmax output. */
  softmaxBackward(rows: number, cols: number, y: FloatArray, yOff: number, gy: FloatArray, gyOff: number, gx: FloatArray, gxOff: number, scale: number): void;

  /**
   * Scaled dot-product attention of every batch entry and head, with grouped key/value heads.
   * q: [B, T, H, D]; k, v: [B, Smax, Hkv, D] of which keys [0, S) are used (a KV cache may be
   * longer); query head h reads key/value head ⌊h·Hkv/H⌋ (H a multiple of Hkv). Per (b, h):
   *   P[b, h] = softmax(scale · q_bh · k_bgᵀ) with the visibility rule of `softmax` (query t at
   *   position pastLen + t; keyMask [B, Smax], 0 = padding key), written to P: [B, H, T, S];
   *   out[b, :, h, :] = P[b, h] · v_bg, out: [B, T, H, D].
   * With S = 0, out is all zeros.
   */
  attention(
    B: number,
    T: number,
    S: number,
    Smax: number,
    H: number,
    Hkv: number,
    D: number,
    q: FloatArray,
    k: FloatArray,
    v: FloatArray,
    P: FloatArray,
    out: FloatArray,
    keyMask: Uint8Array | null,
    causal: boolean,
    pastLen: number,
    scale: number,
  ): void;
  /**
   * Gradients of `attention` given P and the output gradient gOut [B, T, H, D], accumulated into
   * gq [B, T, H, D] and gk, gv [B, Smax, Hkv, D] (rows ≥ S untouched); a null gradient is skipped.
   * With dP = gOut_bh · v_bgᵀ and dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)):
   *   gq_bh += dS · k_bg;   gk_bg += dSᵀ · q_bh;   gv_bg += P_bhᵀ · gOut_bh.
   * `causal` and `pastLen` are the forward's: P is 0 where they hide a key, and a kernel may skip
   * those products.
   */
  attentionBackward(
    B: number,
    T: number,
    S: number,
    Smax: number,
    H: number,
    Hkv: number,
    D: number,
    q: FloatArray,
    k: FloatArray,
    v: FloatArray,
    P: FloatArray,
    gOut: FloatArray,
    causal: boolean,
    pastLen: number,
    scale: number,
    gq: FloatArray | null,
    gk: FloatArray | null,
    gv: FloatArray | null,
  ): void;

  /**
   * Strided row copy: dst[dstOff + r·ldDst + j] = (or +=, with `accumulate`) src[srcOff + r·ldSrc + j]
   * for r < rows, j < cols. ldSrc = 0 repeats one source row; src and dst must not overlap.
   */
  copy2d(rows: number, cols: number, src: FloatArray, srcOff: number, ldSrc: number, dst: FloatArray, dstOff: number, ldDst: number, accumulate: boolean): void;

  /**
   * Per row r of logits [rows, V]: lse[r] = log Σ_v exp(logits[r,v]) and
   * logp[r] = logits[r, targets[r]] − lse[r]. Rows whose target is < 0 get logp 0 (ignored).
   */
  logSoftmaxGather(rows: number, V: number, logits: FloatArray, targets: Int32Array, logp: FloatArray, lse: FloatArray): void;
  /**
   * gLogits[r,v] += gLogp[r] · (1[v = targets[r]] − exp(logits[r,v] − lse[r])); skips target < 0.
   * Without `accumulate`, writes instead (gLogits's old contents are ignored; rows of target < 0 become 0).
   */
  logSoftmaxGatherBackward(
    rows: number,
    V: number,
    logits: FloatArray,
    lse: FloatArray,
    targets: Int32Array,
    gLogp: FloatArray,
    gLogits: FloatArray,
    accumulate: boolean,
  ): void;
  /** Entropy −Σ p log p of softmax(logits[r]) per row, given lse from logSoftmaxGather. */
  entropy(rows: number, V: number, logits: FloatArray, lse: FloatArray, out: FloatArray): void;

  /** RMSNorm over rows of [rows, C]: out = x · rstd · w, rstd[r] = 1/sqrt(mean(x²) + eps). */
  rmsnorm(rows: number, C: number, x: FloatArray, w: FloatArray, eps: number, out: FloatArray, rstd: FloatArray): void;
  rmsnormBackward(rows: number, C: number, x: FloatArray, w: FloatArray, rstd: FloatArray, gy: FloatArray, gx: FloatArray, gw: FloatArray): void;

  /** LayerNorm over rows of [rows, C]: out = (x − mean) · rstd · w + b. */
  layernorm(rows: number, C: number, x: FloatArray, w: FloatArray, b: FloatArray, eps: number, out: FloatArray, mean: FloatArray, rstd: FloatArray): void;
  layernormBackward(
    rows: number,
    C: number,
    x: FloatArray,
    w: FloatArray,
    mean: FloatArray,
    rstd: FloatArray,
    gy: FloatArray,
    gx: FloatArray,
    gw: FloatArray,
    gb: FloatArray,
  ): void;

  /**
   * Rotary embedding ("rotate_half" convention of HF Llama/Qwen2) on x viewed as [rows, H, D]:
   * for i < D/2 with (c, s) = (cos, sin)[positions[r], i]:
   *   out[i] = x[i]·c − x[i+D/2]·s;   out[i+D/2] = x[i+D/2]·c + x[i]·s.
   * cos/sin are [maxPos, D/2] tables. `out` may alias `x`.
   */
  rope(rows: number, H: number, D: number, x: FloatArray, positions: Int32Array, cos: FloatArray, sin: FloatArray, out: FloatArray): void;
  /** gx += Rᵀ · gy (gx = Rᵀ · gy unless `accumulate`): the rotation by −angle of the incoming gradient. */
  ropeBackward(
    rows: number,
    H: number,
    D: number,
    gy: FloatArray,
    positions: Int32Array,
    cos: FloatArray,
    sin: FloatArray,
    gx: FloatArray,
    accumulate: boolean,
  ): void;

  /** SwiGLU: out = silu(gate) · up, elementwise over n. */
  swiglu(n: number, gate: FloatArray, up: FloatArray, out: FloatArray): void;
  /** gGate += gy · up · silu'(gate), gUp += gy · silu(gate); written instead unless `accumulate`. */
  swigluBackward(n: number, gate: FloatArray, up: FloatArray, gy: FloatArray, gGate: FloatArray, gUp: FloatArray, accumulate: boolean): void;

  /** out[i, :] = W[ids[i], :] for i < n, W is [V, C]. */
  embedding(n: number, C: number, ids: Int32Array, W: FloatArray, out: FloatArray): void;
  /** gW[ids[i], :] += gy[i, :] (scatter-add). */
  embeddingBackward(n: number, C: number, ids: Int32Array, gy: FloatArray, gW: FloatArray): void;

  /**
   * One AdamW step on n parameters (decoupled weight decay, PyTorch semantics):
   * p −= lr·wd·p; m = b1·m + (1−b1)·g; v = b2·v + (1−b2)·g²;
   * p −= lr · (m / bc1) / (sqrt(v / bc2) + eps), with bc1 = 1 − b1^t, bc2 = 1 − b2^t.
   */
  adamw(
    n: number,
    p: FloatArray,
    g: FloatArray,
    m: FloatArray,
    v: FloatArray,
    lr: number,
    b1: number,
    b2: number,
    eps: number,
    wd: number,
    bc1: number,
    bc2: number,
  ): void;

  /**
   * Top-k of each row of x [rows, n] in descending order (ties: lower index first):
   * vals[r, j], idx[r, j] for j < k.
   */
  topk(rows: number, n: number, x: FloatArray, k: number, vals: FloatArray, idx: Int32Array): void;
}

/** Every kernel name of the interface; used by tests to check both backends cover all of them. */
export const KERNELS = [
  'gemm',
  'gemmPair',
  'packedFloats',
  'packB',
  'gemmPrepacked',
  'binary',
  'unary',
  'unaryBackward',
  'axpy',
  'scale',
  'sumSquares',
  'reduceSum',
  'softmax',
  'softmaxBackward',
  'attention',
  'attentionBackward',
  'copy2d',
  'logSoftmaxGather',
  'logSoftmaxGatherBackward',
  'entropy',
  'rmsnorm',
  'rmsnormBackward',
  'layernorm',
  'layernormBackward',
  'rope',
  'ropeBackward',
  'swiglu',
  'swigluBackward',
  'embedding',
  'embeddingBackward',
  'adamw',
  'topk',
] as const satisfies readonly (keyof Backend)[];
