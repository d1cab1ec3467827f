/*
 * magrpo native kernels: the declarations shared by the files of native/.
 *
 * One file per kernel family, each kernel's forward beside its backward:
 *   gemm.c         gemm: the few-rows kernel of x · Wᵀ, else blas_sgemm
 *   blas.c         BLAS glue: a user's OpenBLAS found at load (dlopen) or the builtin sgemm; threads
 *   sgemm.c        the builtin sgemm: packed, cache-blocked, one micro-kernel per ISA
 *   pool.c         the thread pool (pthreads) behind PARALLEL_RANGE
 *   elementwise.c  binary, unary (activations), axpy, scale, sums, copies, SwiGLU, embedding
 *   attention.c    softmax, attention (with KV cache), RoPE
 *   norms.c        RMSNorm, LayerNorm
 *   optim.c        AdamW
 *   sampling.c     log-softmax gather (cross-entropy), entropy, top-k
 *   bf16gemm.c     precision bf16 products: VDPBF16PS, or emulated; which kernel runs
 *   amxgemm.c      the same products on AMX tiles
 *   decode.c       one Llama-family decode step in one call (the kernels above in sequence)
 *   dispatch.c     process set-up at load: the kernel table for this CPU, threads, malloc
 *   binding.c      N-API: argument checks, the JS functions, module init
 *
 * A kernel family exposes launchers (e.g. rmsnorm_forward) that split the work into row ranges
 * and run a loop function on each, in parallel when the work is large enough. Launchers take
 * checked arguments: binding.c validates every size, offset and index before calling them.
 *
 * Loops are written once and compiled once per instruction set (see "ISA dispatch" below); the
 * launchers call them through the table `kern` chosen at load.
 */
#ifndef MAGRPO_H
#define MAGRPO_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The prebuilt addon (x86-64, glibc) runs on glibc 2.28 and later, like Node 20 itself: symbols
 * that newer glibc versions re-versioned (pthread and dl functions moved into libc in 2.34, log
 * in 2.29) are bound to their old versions, which every later glibc still provides. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_sigmask,pthread_sigmask@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
#endif

/* ---------------------------------------------------------------------------------------------
 * Threads. One process-wide count shared by OpenBLAS (when one is loaded) and our thread pool;
 * kernels may run on several worker_threads, and every job reads the count when it starts.
 * ------------------------------------------------------------------------------------------- */

extern int g_threads; /* read and written with __atomic builtins */

/* Below this much work a kernel runs on the calling thread: PAR_MIN elements of an elementwise
 * loop, PAR_MIN_FLOPS multiply-adds of a product (~0.1 ms either way). Every parallel region ends
 * in a barrier, and when other processes hold the cores a thread can miss it by a whole time
 * slice, so small kernels (decode steps make hundreds) are not worth splitting. */
#define PAR_MIN (1 << 17)
#define PAR_MIN_FLOPS (1 << 21)
#define MAX_THREADS 4096

/* Gradients summed over rows (norm weights, embeddings) go by blocks of COL_BLOCK columns, one
 * block per task, so threads never write the same element. */
#define COL_BLOCK 64

static inline int threads(void) { return __atomic_load_n(&g_threads, __ATOMIC_RELAXED); }

/* The thread pool (pool.c). parallel_run calls fn(t, T, ctx) for t in [0, T) on T threads, the
 * caller running t = 0; inside a job, or while another thread's job runs, it calls fn(0, 1, ctx)
 * on the calling thread. thread_index() / team_size() are the slice and team of the running job
 * (0 and 1 outside one). */
typedef void (*TaskFn)(int t, int T, void *ctx);
typedef void (*RangeFn)(int64_t lo, int64_t hi, const void *args);
void parallel_run(int T, TaskFn fn, void *ctx);
/* fn(lo, hi, args) on equal slices of [0, n), one per thread. */
void parallel_range(int64_t n, RangeFn fn, const void *args);
int thread_index(void);
int team_size(void);

/* Calls fn(lo, hi, args) on equal slices of [0, n), one per thread, when `work` (elements touched)
 * is large enough; otherwise fn(0, n, args) directly, since waking the pool costs microseconds.
 * fn takes a pointer to its own argument struct (cast through void (*)(void) for the pool). */
#define PARALLEL_RANGE(work, n, fn, args) PARALLEL_RANGE_ABOVE(PAR_MIN, work, n, fn, args)
#define PARALLEL_RANGE_ABOVE(min, work, n, fn, args)                      \
  do {                                                                    \
    int64_t n_ = (n);                                                     \
    if ((work) >= (min) && n_ > 1 && threads() > 1 && team_size() == 1)  \
      parallel_range(n_, (RangeFn)(void (*)(void))(fn), (args));          \
    else                                                                  \
      (fn)(0, n_, (args));                                                \
  } while (0)

/* Sets the thread count of OpenBLAS and of our loops (blas.c). */
void set_threads(int n);

/* ---------------------------------------------------------------------------------------------
 * ISA dispatch. A hot loop is written once, as an always-inline function of (lo, hi, args) that
 * the compiler vectorises, then compiled once per instruction set by a wrapper with a target
 * attribute (LOOP_VARIANTS) — never a global -m flag, so the addon runs on any CPU of its
 * architecture. dispatch.c picks one table of wrappers at load, from the CPU's features or from
 * MAGRPO_ISA. On x86-64 the variants are SSE2 (the baseline), AVX2+FMA and AVX-512 (F, BW, VL);
 * elsewhere only the generic build, vectorised for that architecture's baseline (NEON on arm64).
 * ------------------------------------------------------------------------------------------- */

typedef enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512, ISA_COUNT } Isa;

/* A loop body or a helper it calls: inlined into each variant, so it compiles for its target. */
#define INLINE static inline __attribute__((always_inline))

INLINE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A GEMM driver's rows for thread t of T (sgemm.c, bf16gemm.c): an equal share of the MR-row
 * panels, cut into `blocks` equal blocks of at most MC rows, block b being rows [row_block_start(b),
 * row_block_start(b + 1)) clipped to `hi`. Whole MC blocks dealt out had left 1024 rows as 576
 * against 448, the first thread's share 12% over half. */
typedef struct {
  int64_t lo, hi, panels, blocks, MR;
} RowShare;
INLINE RowShare row_share(int64_t M, int64_t MR, int64_t MC, int t, int T) {
  int64_t all = (M + MR - 1) / MR, lo = all * t / T * MR, hi = min64(M, all * (t + 1) / T * MR);
  int64_t panels = (hi - lo + MR - 1) / MR;
  return (RowShare){lo, hi, panels, (panels + MC / MR - 1) / (MC / MR), MR};
}
INLINE int64_t row_block_start(const RowShare *s, int64_t b) { return min64(s->hi, s->lo + s->panels * b / s->blocks * s->MR); }

#define TARGET_generic
#if defined(__x86_64__)
#define MAGRPO_X86 1
#define TARGET_avx2 __attribute__((target("avx2,fma")))
/* GCC's generic tuning would otherwise vectorise AVX-512 code with 256-bit registers. */
#if defined(__clang__)
#define TARGET_avx512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl"), min_vector_width(512)))
#else
#define TARGET_avx512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,prefer-vector-width=512")))
#endif
#define FOR_EACH_ISA(M, ...) M(generic, __VA_ARGS__) M(avx2, __VA_ARGS__) M(avx512, __VA_ARGS__)
#else
#define MAGRPO_X86 0
#define FOR_EACH_ISA(M, ...) M(generic, __VA_ARGS__)
#endif

/* name__generic, name__avx2, ...: the variants of the loop `name`, whose body is the INLINE
 * function name(lo, hi, a). A family file ends with FAMILY_LOOPS(LOOP_VARIANTS). */
#define LOOP_VARIANT_(isa, name, Args) \
  TARGET_##isa void name##__##isa(int64_t lo, int64_t hi, const Args *a) { name(lo, hi, a); }
#define LOOP_VARIANTS(name, Args) FOR_EACH_ISA(LOOP_VARIANT_, name, Args)
/* For loops whose vectorised rows are short (RoPE's half rows, decode-time dot products: 16-64
 * floats), where AVX-512 code is slower than AVX2 code on Zen 4 (its 512-bit vectors issue at half
 * rate and short rows leave them part empty): the AVX-512 table gets the AVX2 code. */
#if MAGRPO_X86
#define LOOP_VARIANTS_SHORT(name, Args)                                                               \
  LOOP_VARIANT_(generic, name, Args) LOOP_VARIANT_(avx2, name, Args)                                  \
  TARGET_avx2 void name##__avx512(int64_t lo, int64_t hi, const Args *a) { name(lo, hi, a); }
#else
#define LOOP_VARIANTS_SHORT(name, Args) LOOP_VARIANTS(name, Args)
#endif
#define LOOP_DECLARE_(isa, name, Args) void name##__##isa(int64_t lo, int64_t hi, const Args *a);
#define LOOP_DECLARE(name, Args) FOR_EACH_ISA(LOOP_DECLARE_, name, Args)

/* ---------------------------------------------------------------------------------------------
 * Math helpers, inlined into the loops that call them.
 * ------------------------------------------------------------------------------------------- */

/* exp for float32, written so that GCC vectorises the loops calling it. Cody-Waite reduction
 * x = n·ln2 + r, |r| ≤ ln2/2, and the Cephes degree-6 polynomial: ≤ 2 ulp on [-87.3, 88.3].
 * Below that range it returns 0 (true value < FLT_MIN), above it +inf; NaN propagates. */
INLINE float fast_expf(float x) {
  const float lo = -87.33654f, hi = 88.3762626647949f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  const float magic = 12582912.0f; /* 1.5·2^23: adding it rounds to an integer in the low bits */
  float t = xc * 1.44269504088896341f + magic;
  int32_t tb;
  memcpy(&tb, &t, sizeof tb);
  float n = t - magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t sb = (tb - 0x4B400000 + 127) << 23; /* 2^n */
  float s;
  memcpy(&s, &sb, sizeof s);
  float y = p * s;
  return x < lo ? 0.0f : (x > hi ? INFINITY : y);
}

/* 1 / (1 + e^-x), stable at both ends. */
INLINE float sigmoidf_(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

/* sigmoid(x) and 1 − sigmoid(x) = e^-x · sigmoid(x); the latter without cancelling when s ≈ 1. */
INLINE float sigmoid_pair(float x, float *one_minus) {
  float e = fast_expf(-x), s = 1.0f / (1.0f + e);
  *one_minus = e < INFINITY ? e * s : 1.0f;
  return s;
}

/* ---------------------------------------------------------------------------------------------
 * gemm.c
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t M, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
} SkinnyArgs;

#define GEMM_LOOPS(X) X(skinny_nt_cols, SkinnyArgs) X(skinny_nn_cols, SkinnyArgs)

/* One gemm_f32 call's arguments (gemm_pair). */
typedef struct {
  bool tA, tB;
  int64_t M, N, K, lda, ldb, ldc;
  double alpha, beta;
  const float *A, *B;
  float *C;
} GemmPairCall;

/* Two independent products (a backward's dX and dW): with exactly two threads each runs on its own,
 * single-threaded, at once. Small products scale poorly over OpenBLAS's two threads; side by side
 * they do not share anything; at large sizes the two ways tie. Below PAIR_MIN_FLOPS (both
 * products) waking the pool costs more than it saves. */
#define PAIR_MIN_FLOPS 2e6
void gemm_pair(const GemmPairCall *a, const GemmPairCall *b);

/* One product as two halves of its output rows at once (blas.c, where the rule is measured); false
 * when it does not apply and the caller runs the product itself. */
#define SPLIT_MIN_ROWS 64
#define SPLIT_MAX_COLS_PER_ROW 8
#define SPLIT_MIN_HALF_MACS 1e6
bool gemm_split_rows(const GemmPairCall *c);

/* C = alpha · op(A) · op(B) + beta · C, row-major, sizes and leading dimensions < 2^31: the
 * few-rows kernel where it wins, else blas_sgemm. */
void gemm_f32(bool tA, bool tB, int64_t M, int64_t N, int64_t K, double alpha, const float *A, int64_t lda, const float *B, int64_t ldb, double beta,
              float *C, int64_t ldc);

/* ---------------------------------------------------------------------------------------------
 * blas.c, sgemm.c
 * ------------------------------------------------------------------------------------------- */

/* One product for the builtin sgemm: C += alpha · op(A) · op(B) (beta is applied before). */
typedef struct {
  bool tA, tB;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha;
  const float *A, *B;
  float *C;
  /* op(B) already packed by sgemm_pack (the whole matrix, in the driver's block order), or NULL:
   * decoding multiplies the same weights by a few rows per token, and packing them on every call
   * costs as much as the product. */
  const float *Bpre;
  bool bpre_bf16; /* Bpre holds bf16 (uint16) panels: decode packs of precision bf16 */
} GemmCall;

#define SGEMM_DECLARE_(isa, _)                                                                          \
  void sgemm_builtin__##isa(const GemmCall *g);                                                       \
  void sgemm_prepacked__##isa(const GemmCall *g);                                                     \
  int64_t sgemm_packed_floats__##isa(int64_t N, int64_t K);                                           \
  void sgemm_pack__##isa(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, float *dst, bool bf16);
FOR_EACH_ISA(SGEMM_DECLARE_, _)

/* Floats of a buffer for sgemm_pack_b (alignment slack included), and the packing itself: op(B)
 * ([K, N], or B [N, K] when tB) in the layout the builtin sgemm of the ISA in use reads. */
int64_t sgemm_packed_floats(int64_t N, int64_t K, bool bf16);
void sgemm_pack_b(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, float *buf, bool bf16);
/* Whether `buf` holds a pack made by sgemm_pack_b with this `bf16` that this process can multiply. */
bool sgemm_pack_matches(const float *buf, bool bf16);
/* C = alpha · A · op(B) + beta · C with op(B) packed by sgemm_pack_b into `buf` (builtin sgemm, or
 * AMX tiles for a bf16 pack made while AMX was the bf16 kernel). */
void sgemm_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *buf, bool bf16, float beta, float *C,
                     int64_t ldc);

/* C = alpha · op(A) · op(B) + beta · C (row-major) with the BLAS chosen at load: the user's
 * OpenBLAS, or the builtin sgemm of the ISA in use. Inside a pool job (attention's heads) it
 * runs on the calling thread alone: an OpenMP OpenBLAS single-threaded, else the builtin sgemm,
 * so that the threads of an OpenBLAS never pile onto the pool's. */
void blas_sgemm(bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                float *C, int64_t ldc);

/* The BLAS in use, for `addon.blas()`. */
typedef struct {
  bool openblas;    /* false: the builtin sgemm */
  const char *path; /* the library file (symlinks resolved), or "" */
  const char *corename, *config; /* OpenBLAS's own words, or "" */
  const char *why;  /* why this one: "MAGRPO_BLAS=builtin", "no OpenBLAS found (...)", ... */
} BlasInfo;

const BlasInfo *blas_info(void);
/* At load (dispatch.c): MAGRPO_BLAS, else the first OpenBLAS that dlopen finds. NULL, or why the
 * addon cannot run (MAGRPO_BLAS names a library that does not load). */
const char *blas_init(void);

/* ---------------------------------------------------------------------------------------------
 * elementwise.c
 * ------------------------------------------------------------------------------------------- */

#define MAX_RANK 8

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };
enum { U_GELU, U_SILU, U_RELU, U_EXP, U_LOG, U_TANH, U_NEG, U_SQRT, U_SQUARE };

/* A binary op over a collapsed view: `rank` dims of `shape`, element strides `as`/`bs`. */
typedef struct {
  int op, rank;
  int64_t shape[MAX_RANK], as[MAX_RANK], bs[MAX_RANK];
  const float *a, *b;
  float *out;
} BinaryArgs;

typedef struct {
  int op;
  const float *x, *gy;
  float *out; /* the backward adds into it */
} UnaryArgs;

typedef struct {
  double alpha;
  const float *x; /* unused by scale */
  float *y;
} AxpyArgs;

typedef struct {
  const float *x;
  double *sum;
} SumSquaresArgs;

typedef struct {
  int64_t len, inner;
  bool acc;
  const float *x;
  float *out;
} ReduceSumArgs;

typedef struct {
  int64_t cols, lds, ldd;
  bool acc;
  const float *src;
  float *dst;
} Copy2dArgs;

typedef struct {
  const float *gate, *up, *gy;
  float *out, *gGate, *gUp;
  bool acc; /* backward: add into gGate and gUp (else write them) */
} SwigluArgs;

typedef struct {
  int64_t n, C;
  const int32_t *ids;
  const float *gy;
  float *gW;
} EmbeddingArgs;

#define ELEMENTWISE_LOOPS(X)                                                                   \
  X(binary_rows, BinaryArgs) X(unary_range, UnaryArgs) X(unary_backward_range, UnaryArgs)      \
  X(axpy_range, AxpyArgs) X(scale_range, AxpyArgs) X(sum_squares_range, SumSquaresArgs)        \
  X(reduce_sum_range, ReduceSumArgs) X(copy2d_rows, Copy2dArgs) X(swiglu_range, SwigluArgs)    \
  X(swiglu_backward_range, SwigluArgs) X(embedding_backward_blocks, EmbeddingArgs)

/* out = a op b over `shape` (rank ≤ MAX_RANK) with element strides as/bs; out is dense. */
void binary_forward(int op, int rank, const int64_t *shape, const float *a, const int64_t *as, const float *b, const int64_t *bs, float *out);
void unary_forward(int op, int64_t n, const float *x, float *out);
/* gx += gy · f'(x) */
void unary_backward(int op, int64_t n, const float *x, const float *gy, float *gx);
void axpy_f32(int64_t n, double alpha, const float *x, float *y);
void scale_f32(int64_t n, double alpha, float *x);
double sum_squares(int64_t n, const float *x);
/* out[o, j] (+)= Σ_l x[o, l, j] over an [outer, len, inner] array. */
void reduce_sum(int64_t outer, int64_t len, int64_t inner, const float *x, float *out, bool acc);
void copy2d(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd, bool acc);
void swiglu_forward(int64_t n, const float *gate, const float *up, float *out);
void swiglu_backward(int64_t n, const float *gate, const float *up, const float *gy, float *gGate, float *gUp, bool acc);
void embedding_forward(int64_t n, int64_t C, const int32_t *ids, const float *W, float *out);
void embedding_backward(int64_t n, int64_t C, const int32_t *ids, const float *gy, float *gW);

/* ---------------------------------------------------------------------------------------------
 * attention.c
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t cols, rowPos0;
  float scale;
  bool causal;
  const uint8_t *km; /* key mask at kmOff, or NULL */
} SoftmaxSpec;

void softmax_forward(int64_t rows, const SoftmaxSpec *sp, const float *x, float *out);
void softmax_backward(int64_t rows, int64_t cols, float scale, const float *y, const float *gy, float *gx);

typedef struct {
  int64_t B, T, S, Smax, H, Hkv, D, pastLen;
  float scale;
  bool causal;
  const uint8_t *km; /* [B, Smax] or NULL */
  const float *q, *k, *v; /* [B, T, H, D], [B, Smax, Hkv, D] x2 */
  /* Decode (T = 1) only, or NULL: row b reads its first kvShared keys and values from row
   * kvRow[b], which holds the same ones (sequences sampled from one prompt, its keys copied to
   * each): the rows of a group then read one copy, which stays in cache from one row to the next. */
  const int32_t *kvRow;
  int64_t kvShared;
} AttnSpec;

typedef struct {
  const float *P, *gO;
  float *gq, *gk, *gv; /* NULL = not wanted */
} AttnGrads;

void attention_forward(const AttnSpec *a, float *P, float *out);
/* False when out of memory for its scratch. */
bool attention_backward(const AttnSpec *a, const AttnGrads *gr);

typedef struct {
  int64_t H, D;
  const int32_t *pos;
  const float *cos, *sin; /* [maxPos, D/2] */
} RopeSpec;

void rope_forward(int64_t rows, const RopeSpec *sp, const float *x, float *out);
void rope_backward(int64_t rows, const RopeSpec *sp, const float *gy, float *gx, bool acc);

typedef struct {
  SoftmaxSpec sp;
  const float *x;
  float *out;
} SoftmaxArgs;

typedef struct {
  int64_t cols;
  float scale;
  const float *y, *gy;
  float *gx;
} SoftmaxBackwardArgs;

typedef struct {
  const AttnSpec *a;
  float *P, *out;
} AttnArgs;

typedef struct {
  const AttnSpec *a;
  const AttnGrads *gr;
  float *scratch; /* T·S floats per thread, for dP and then dS */
} AttnBackwardArgs;

typedef struct {
  RopeSpec sp;
  const float *x; /* gy for the backward */
  float *out;     /* gx for the backward, which adds into it when acc (else writes it) */
  bool acc;
} RopeArgs;

#define ATTENTION_LOOPS(X)                                                                                   \
  X(softmax_rows, SoftmaxArgs) X(softmax_backward_rows, SoftmaxBackwardArgs) X(attention_heads, AttnArgs)   \
  X(attention_decode_groups, AttnArgs) X(attention_backward_groups, AttnBackwardArgs) X(rope_rows, RopeArgs) \
  X(rope_backward_rows, RopeArgs)

/* ---------------------------------------------------------------------------------------------
 * norms.c
 * ------------------------------------------------------------------------------------------- */

/* The arguments of every norm loop; each uses the ones of its kernel. */
typedef struct {
  int64_t rows, C;
  double eps;
  const float *x, *w, *b, *gy;
  float *out, *mean, *rstd, *gx, *gw, *gb;
} NormArgs;

#define NORMS_LOOPS(X)                                                                                     \
  X(rmsnorm_rows, NormArgs) X(rmsnorm_backward_rows, NormArgs) X(rmsnorm_gw_blocks, NormArgs)              \
  X(layernorm_rows, NormArgs) X(layernorm_backward_rows, NormArgs) X(layernorm_gwb_blocks, NormArgs)

void rmsnorm_forward(int64_t rows, int64_t C, const float *x, const float *w, double eps, float *out, float *rstd);
void rmsnorm_backward(int64_t rows, int64_t C, const float *x, const float *w, const float *rstd, const float *gy, float *gx, float *gw);
void layernorm_forward(int64_t rows, int64_t C, const float *x, const float *w, const float *b, double eps, float *out, float *mean, float *rstd);
void layernorm_backward(int64_t rows, int64_t C, const float *x, const float *w, const float *mean, const float *rstd, const float *gy, float *gx,
                        float *gw, float *gb);

/* ---------------------------------------------------------------------------------------------
 * optim.c
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  double lr, b1, b2, eps, wd, bc1, bc2;
} AdamSpec;

typedef struct {
  AdamSpec h;
  float *p, *m, *v;
  const float *g;
} AdamArgs;

#define OPTIM_LOOPS(X) X(adamw_range, AdamArgs)

void adamw_update(int64_t n, const AdamSpec *h, float *p, const float *g, float *m, float *v);

/* ---------------------------------------------------------------------------------------------
 * sampling.c
 * ------------------------------------------------------------------------------------------- */

/* The arguments of the loops over vocabulary rows; each uses the ones of its kernel. */
typedef struct {
  int64_t V;
  const float *logits, *gLogp;
  const int32_t *targets;
  float *lse, *logp, *out, *gLogits;
  bool accumulate; /* backward: add into gLogits (else write every row, 0 for ignored targets) */
} VocabArgs;

#define SAMPLING_LOOPS(X) \
  X(log_softmax_gather_rows, VocabArgs) X(log_softmax_gather_backward_rows, VocabArgs) X(entropy_rows, VocabArgs)

/* Targets are < V; negative targets are ignored (logp 0, no gradient). */
void log_softmax_gather_forward(int64_t rows, int64_t V, const float *logits, const int32_t *targets, float *logp, float *lse);
void log_softmax_gather_backward(int64_t rows, int64_t V, const float *logits, const float *lse, const int32_t *targets, const float *gLogp,
                                 float *gLogits, bool accumulate);
void entropy_forward(int64_t rows, int64_t V, const float *logits, const float *lse, float *out);
/* False when out of memory for its heaps. */
bool topk_rows(int64_t rows, int64_t n, int64_t k, const float *x, float *vals, int32_t *idx);

/* ---------------------------------------------------------------------------------------------
 * decode.c
 * ------------------------------------------------------------------------------------------- */

/* One layer's weights: norms [C], projections packed by sgemm_pack_b (transposed HF [out, in]
 * weights), biases [out] or NULL. */
typedef struct {
  const float *ln1, *ln2;
  const float *q, *k, *v, *o, *gate, *up, *down;
  const float *bq, *bk, *bv, *bo, *bgate, *bup, *bdown;
} LlamaDecodeLayer;

/* Projections per layer that may carry a LoRA adapter, in this order: q, k, v, o, gate, up, down. */
#define DECODE_LORA_PROJ 7

/* The LoRA adapters of a run of rows (one agent's sequences over a base shared by several): per
 * layer and projection A [r, in] then B [out, r], NULL where that projection has none. The step adds
 * scale · (x Aᵀ) Bᵀ to those rows' products with the base weight's pack. */
typedef struct {
  int64_t row0, row1; /* the rows [row0, row1) of the whole step */
  int64_t r;
  float scale; /* alpha / r */
  const float *const *ab; /* [L · DECODE_LORA_PROJ · 2] */
} LlamaDecodeLora;

typedef struct {
  int64_t R, L, C, H, Hkv, D, F, V;
  int64_t row0; /* the first row's index in the whole step (a thread's slice starts past 0) */
  int64_t nLora, maxRank;
  const LlamaDecodeLora *lora; /* nLora runs of rows, each with its adapters; none: the packs alone */
  int64_t Smax, len; /* cache rows per sequence; keys already in it (the new one goes to row len) */
  double eps;
  bool bf16; /* the packs hold bf16 */
  const float *embed, *lnf, *head; /* head packed */
  const LlamaDecodeLayer *layers;
  float *const *cacheK, *const *cacheV; /* per layer [R, Smax, Hkv, D] */
  const uint8_t *keyMask;               /* [R, Smax], row len already set */
  const int32_t *ids, *pos;             /* [R] */
  const float *cos, *sin;               /* RoPE tables [maxPos, D/2] */
  const int32_t *kvRow;                 /* [R] or NULL: AttnSpec's, rows of the whole step */
  int64_t kvShared;
} LlamaDecode;

/* The step; logits [R, V]. False when out of memory for its scratch. */
bool llama_decode_step(const LlamaDecode *d, float *logits);

/* ---------------------------------------------------------------------------------------------
 * The kernel table (dispatch.c): one entry per loop, all of one ISA.
 * ------------------------------------------------------------------------------------------- */

#define ALL_LOOPS(X) GEMM_LOOPS(X) ELEMENTWISE_LOOPS(X) ATTENTION_LOOPS(X) NORMS_LOOPS(X) OPTIM_LOOPS(X) SAMPLING_LOOPS(X)

ALL_LOOPS(LOOP_DECLARE)

typedef struct {
  Isa isa;
  void (*sgemm)(const GemmCall *g); /* the builtin sgemm of this ISA */
  void (*sgemm_prepacked)(const GemmCall *g); /* C += alpha · A · B with g->Bpre set */
  int64_t (*sgemm_packed_floats)(int64_t N, int64_t K);
  void (*sgemm_pack)(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, float *dst, bool bf16);
#define KERNEL_FIELD(name, Args) void (*name)(int64_t lo, int64_t hi, const Args *a);
  ALL_LOOPS(KERNEL_FIELD)
#undef KERNEL_FIELD
} Kernels;

/* The table in use: set once at load, before any kernel runs. */
extern const Kernels *kern;

extern const char *const ISA_NAMES[ISA_COUNT];

/* Once per process: chooses the kernel table, the BLAS and the thread count. NULL, or why the
 * addon cannot run here (a bad MAGRPO_ISA or MAGRPO_BLAS; the message starts with its name). */
const char *magrpo_init(void);
/* Whether this CPU runs the given variant. */
bool isa_supported(Isa isa);

/* Mixed precision (bf16gemm.c): products of at least BF16_MIN_ROWS rows take bf16 inputs and
 * fp32 accumulation while it is on; `emulate` forces the rounding-then-sgemm path (tests). */
#define BF16_MIN_ROWS 16
void set_precision_bf16(bool on, bool emulate);
bool precision_bf16(void);
/* What bf16 products run on: AMX tiles (amxgemm.c), VDPBF16PS (bf16gemm.c), or emulated (the same
 * rounding, then the fp32 sgemm). */
typedef enum { BF16K_EMULATED, BF16K_AVX512BF16, BF16K_AMX, BF16K_COUNT } Bf16Kernel;
extern const char *const BF16_KERNEL_NAMES[BF16K_COUNT];
/* At load, after the ISA (dispatch.c): the best kernel here, or MAGRPO_BF16_KERNEL's. NULL, or why
 * the addon cannot run (the variable names a kernel this machine cannot run; the message starts
 * with its name). */
const char *bf16_kernel_init(void);
/* The kernel bf16 products run on now (emulated under set_precision_bf16(_, true)). */
Bf16Kernel bf16_kernel(void);
/* Whether the machine's bf16 kernel is AMX (tiles granted), whatever the emulation switch says. */
bool bf16_kernel_has_amx(void);
/* Whether bf16 products run on bf16 hardware here (AMX or VDPBF16PS), not emulated. */
bool bf16_native(void);
bool cpu_has_avx512bf16(void);
float round_to_bf16(float x);

/* AMX (amxgemm.c): x86-64 Linux, compilers that know the tile instructions (GCC 11, clang 12). */
#if defined(__x86_64__) && defined(__linux__) && ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define MAGRPO_AMX 1
#else
#define MAGRPO_AMX 0
#endif
/* Whether this CPU has AMX-BF16 and AMX-TILE and Linux granted the process the tile state (asked
 * for here, once); else false with the reason in `why`. */
bool amx_enable(char *why, size_t n);
/* gemm_bf16's product on AMX tiles (g->alpha ≠ 0, K > 0); only once amx_enable said yes. */
void gemm_bf16_amx(const GemmCall *g, float beta);
/* Decode packs on AMX tiles (amxgemm.c): bf16 elements of a pack of op(B) [K, N], the packing,
 * and C += alpha · bf16(A) · B over `threads` threads. Only once amx_enable said yes. */
int64_t amx_packed_elems(int64_t N, int64_t K);
void amx_pack_b(bool tB, int64_t N, int64_t K, const float *B, int64_t ldb, uint16_t *dst);
void amx_gemm_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const uint16_t *pack, float *C, int64_t ldc,
                        int threads);

/* Building blocks for kernels that keep their own AMX packs (attention.c); only once amx_enable said
 * yes. A pack of op(A) (amx_pack_a: `rows` rows × kc, panels of 32 rows) or of op(B) (amx_pack_b:
 * panels of 32 columns) holds per panel two halves of amx_panel_elems(kc) / 2 elements, each its
 * ceil(kc / 32) tiles of 512 bf16 in inner order, zero past the matrix. amx_tile_product adds
 * alpha · (first nkb inner tiles of a) · (of b) into C[0:mr, 0:nr] (mr, nr ≤ 32) as the products'
 * micro-kernel does (first: alpha · acc + beta · C, else C + alpha · acc), `ahalf`/`bhalf` being
 * each pack's half-panel stride; b may point at a later tile of its pack. Tiles must be configured
 * on the calling thread (amx_tiles_begin ... amx_tiles_end). amx_scratch: per-thread buffers
 * (slots 0-4), grown on demand and kept; NULL when out of memory. */
int64_t amx_panel_elems(int64_t kc);
uint16_t *amx_scratch(int slot, size_t n);
void amx_tiles_begin(void);
void amx_tiles_end(void);
void amx_pack_a(bool tA, const float *A, int64_t lda, int64_t rows, int64_t kc, uint16_t *dst);
void amx_tile_product(int64_t nkb, const uint16_t *a, int64_t ahalf, const uint16_t *b, int64_t bhalf, float *c, int64_t ldc, float alpha, float beta,
                      bool first, int64_t mr, int64_t nr);

/* bf16 <-> fp32 bit conversions, shared by the bf16 products and the bf16 decode packs. */
/* Round to nearest even, keeping NaNs NaN (quiet) and infinities infinite; a subnormal becomes a
 * zero of its sign. That is what VCVTNE2PS2BF16 does (checked on 2^31 values, specials and ties
 * included), so the packing's one instruction and this agree bit for bit; the flushed values are
 * below 1.2e-38, which no fp32 sum of products notices. */
static inline uint16_t bf16_from_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float f32_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void gemm_bf16(bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc);

/* One thread's FP32 peak in GFLOP/s, from an FMA loop in the vectors of `isa` (peak.c). */
double fma_peak_gflops(Isa isa, double seconds);

#endif
