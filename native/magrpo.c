/*
 * magrpo native kernels: the `Backend` interface of src/engine/backend.ts as an N-API addon.
 * gemm goes to OpenBLAS cblas_sgemm; every other kernel is a C loop, parallelised with OpenMP
 * when the work is large enough to pay for waking the threads.
 *
 * Every argument is checked before any loop runs: wrong types and too-short buffers throw a
 * TypeError naming the argument, bad sizes or indices a RangeError, so no kernel reads or writes
 * out of bounds. Float math is float32 with double accumulators for every reduction.
 */
#include <node_api.h>

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---------------------------------------------------------------------------------------------
 * Threads. One process-wide count shared by OpenBLAS and our OpenMP regions; it is passed to each
 * region with num_threads() because omp_set_num_threads only affects the calling thread, and
 * kernels may run on several worker_threads.
 * ------------------------------------------------------------------------------------------- */

static int g_threads = 1; /* read and written with __atomic builtins */

/* Below this much work a kernel runs on the calling thread: PAR_MIN elements of an elementwise
 * loop, PAR_MIN_FLOPS multiply-adds of a product (~0.1 ms either way). Every parallel region ends
 * in a barrier, and when other processes hold the cores a thread can miss it by a whole time
 * slice, so small kernels (decode steps make hundreds) are not worth splitting. */
#define PAR_MIN (1 << 17)
#define PAR_MIN_FLOPS (1 << 21)
#define MAX_THREADS 4096

static inline int threads(void) { return __atomic_load_n(&g_threads, __ATOMIC_RELAXED); }

#ifdef _OPENMP
static inline int thread_index(void) { return omp_get_thread_num(); }
static inline int team_size(void) { return omp_get_num_threads(); }
#else
static inline int thread_index(void) { return 0; }
static inline int team_size(void) { return 1; }
#endif

/* Calls fn(lo, hi, ...) on equal slices of [0, n), one per thread, when `work` (elements touched)
 * is large enough; otherwise fn(0, n, ...) directly, since even an OpenMP region whose if()
 * clause is false costs about a microsecond of team setup. */
#define PARALLEL_RANGE(work, n, fn, ...) PARALLEL_RANGE_ABOVE(PAR_MIN, work, n, fn, __VA_ARGS__)
#define PARALLEL_RANGE_ABOVE(min, work, n, fn, ...)                       \
  do {                                                                    \
    int64_t n_ = (n);                                                     \
    if ((work) >= (min) && n_ > 1 && threads() > 1) {                     \
      _Pragma("omp parallel num_threads(threads())")                      \
      {                                                                   \
        int64_t t_ = thread_index(), T_ = team_size();                    \
        fn(n_ * t_ / T_, n_ * (t_ + 1) / T_, __VA_ARGS__);                \
      }                                                                   \
    } else {                                                              \
      fn(0, n_, __VA_ARGS__);                                             \
    }                                                                     \
  } while (0)

static void set_threads(int n) {
  __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
  openblas_set_num_threads(n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

static int env_threads(const char *name) {
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return 0;
  char *end;
  long n = strtol(s, &end, 10);
  return (*end == '\0' && n > 0 && n <= MAX_THREADS) ? (int)n : 0;
}

/* Tensors are freed by V8's garbage collector in bursts, and glibc's defaults hand big freed
 * blocks back to the kernel (blocks over 128 KiB-32 MiB live in their own mmap, and the heap is
 * trimmed when its free top passes 128 KiB), so every step's allocations page-fault and zero
 * fresh memory again: 10% of a step at 1M parameters, 8% at 124M (600 MB of faults per step).
 * Keep every block on the heap and never trim it: the process stays at its peak size, which the
 * next step reuses. Worker threads' arenas still mmap what does not fit their heaps. */
static void tune_malloc(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
#endif
}

static void init_process_once(void) {
  tune_malloc();
  int n = env_threads("MAGRPO_NUM_THREADS");
  if (n == 0) n = env_threads("OPENBLAS_NUM_THREADS");
  if (n == 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    n = cores > 0 ? (int)cores : 1;
  }
  set_threads(n);
}

/* ---------------------------------------------------------------------------------------------
 * Argument parsing. A `Call` collects arguments; the first failure throws and marks the call
 * failed, later getters become no-ops, and the kernel checks `c.failed` once before working.
 * ------------------------------------------------------------------------------------------- */

#define MAX_ARGS 16

typedef struct {
  napi_env env;
  const char *fn;
  napi_value argv[MAX_ARGS];
  bool failed;
} Call;

static void fail(Call *c, bool range, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(Call *c, bool range, const char *fmt, ...) {
  if (c->failed) return;
  char msg[320];
  int n = snprintf(msg, sizeof msg, "native.%s: ", c->fn);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  if (range)
    napi_throw_range_error(c->env, "NATIVE_BAD_ARGUMENT", msg);
  else
    napi_throw_type_error(c->env, "NATIVE_BAD_ARGUMENT", msg);
  c->failed = true;
}

static bool call_init(Call *c, napi_env env, napi_callback_info info, const char *fn, size_t want) {
  c->env = env;
  c->fn = fn;
  c->failed = false;
  size_t argc = MAX_ARGS;
  if (napi_get_cb_info(env, info, &argc, c->argv, NULL, NULL) != napi_ok) {
    fail(c, false, "could not read arguments");
    return false;
  }
  if (argc < want) {
    fail(c, false, "expects %zu arguments, got %zu", want, argc);
    return false;
  }
  return true;
}

static double arg_number(Call *c, size_t i, const char *name) {
  if (c->failed) return 0;
  double d;
  if (napi_get_value_double(c->env, c->argv[i], &d) != napi_ok) {
    fail(c, false, "%s must be a number", name);
    return 0;
  }
  return d;
}

/* An integer in [lo, 2^53]; sizes use lo = 0. */
static int64_t arg_int(Call *c, size_t i, const char *name, double lo) {
  double d = arg_number(c, i, name);
  if (c->failed) return 0;
  if (!(d >= lo && d <= 9007199254740992.0) || d != floor(d)) {
    fail(c, true, "%s must be an integer >= %.0f, got %g", name, lo, d);
    return 0;
  }
  return (int64_t)d;
}

static bool arg_bool(Call *c, size_t i, const char *name) {
  if (c->failed) return false;
  bool b;
  if (napi_get_value_bool(c->env, c->argv[i], &b) != napi_ok) {
    fail(c, false, "%s must be a boolean", name);
    return false;
  }
  return b;
}

static const char *typed_array_name(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array: return "Int8Array";
    case napi_uint8_array: return "Uint8Array";
    case napi_uint8_clamped_array: return "Uint8ClampedArray";
    case napi_int16_array: return "Int16Array";
    case napi_uint16_array: return "Uint16Array";
    case napi_int32_array: return "Int32Array";
    case napi_uint32_array: return "Uint32Array";
    case napi_float32_array: return "Float32Array";
    case napi_float64_array: return "Float64Array";
    case napi_bigint64_array: return "BigInt64Array";
    case napi_biguint64_array: return "BigUint64Array";
    default: return "typed array";
  }
}

static const char *js_type_name(Call *c, napi_value v) {
  napi_valuetype t;
  if (napi_typeof(c->env, v, &t) != napi_ok) return "unknown";
  switch (t) {
    case napi_undefined: return "undefined";
    case napi_null: return "null";
    case napi_boolean: return "boolean";
    case napi_number: return "number";
    case napi_string: return "string";
    case napi_symbol: return "symbol";
    case napi_object: {
      bool arr = false;
      napi_is_array(c->env, v, &arr);
      return arr ? "Array" : "object";
    }
    case napi_function: return "function";
    case napi_bigint: return "bigint";
    default: return "unknown";
  }
}

/* The data of a typed array of type `want` holding at least `need` elements. `need` is a double
 * so that products of sizes cannot overflow before the comparison. */
static void *arg_typed(Call *c, size_t i, const char *name, napi_typedarray_type want, double need, size_t *len_out) {
  if (c->failed) return NULL;
  napi_value v = c->argv[i];
  napi_typedarray_type type;
  size_t len;
  void *data;
  if (napi_get_typedarray_info(c->env, v, &type, &len, &data, NULL, NULL) != napi_ok) { /* not a typed array */
    fail(c, false, "%s must be a %s, got %s", name, typed_array_name(want), js_type_name(c, v));
    return NULL;
  }
  if (type != want) {
    fail(c, false, "%s must be a %s, got %s", name, typed_array_name(want), typed_array_name(type));
    return NULL;
  }
  if ((double)len < need) {
    fail(c, false, "%s has %zu elements, needs at least %.0f", name, len, need);
    return NULL;
  }
  if (len_out) *len_out = len;
  return data;
}

static float *arg_f32(Call *c, size_t i, const char *name, double need) {
  return (float *)arg_typed(c, i, name, napi_float32_array, need, NULL);
}
static int32_t *arg_i32(Call *c, size_t i, const char *name, double need) {
  return (int32_t *)arg_typed(c, i, name, napi_int32_array, need, NULL);
}
/* A Float32Array table whose extent is implied by indices (W, cos, sin): returns its length too. */
static float *arg_f32_table(Call *c, size_t i, const char *name, size_t *len) {
  *len = 0;
  return (float *)arg_typed(c, i, name, napi_float32_array, 0, len);
}

static void arg_string(Call *c, size_t i, const char *name, char *buf, size_t cap) {
  buf[0] = '\0';
  if (c->failed) return;
  size_t len;
  if (napi_get_value_string_utf8(c->env, c->argv[i], buf, cap, &len) != napi_ok) fail(c, false, "%s must be a string", name);
}

static napi_value undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

/* ---------------------------------------------------------------------------------------------
 * Math helpers.
 * ------------------------------------------------------------------------------------------- */

/* exp for float32, written so that GCC vectorises the loops calling it. Cody-Waite reduction
 * x = n·ln2 + r, |r| ≤ ln2/2, and the Cephes degree-6 polynomial: ≤ 2 ulp on [-87.3, 88.3].
 * Below that range it returns 0 (true value < FLT_MIN), above it +inf; NaN propagates. */
static inline float fast_expf(float x) {
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
static inline float sigmoidf_(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

/* sigmoid(x) and 1 − sigmoid(x) = e^-x · sigmoid(x); the latter without cancelling when s ≈ 1. */
static inline float sigmoid_pair(float x, float *one_minus) {
  float e = fast_expf(-x), s = 1.0f / (1.0f + e);
  *one_minus = e < INFINITY ? e * s : 1.0f;
  return s;
}

/* GELU tanh approximation, via 0.5·(1 + tanh u) = sigmoid(2u), which does not cancel for x ≪ 0. */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f
static inline float gelu_(float x) {
  float u = GELU_K * (x + GELU_C * x * x * x);
  return x * sigmoidf_(2.0f * u);
}
static inline float gelu_grad(float x) {
  float u = GELU_K * (x + GELU_C * x * x * x);
  float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
  float q, s = sigmoid_pair(2.0f * u, &q), t = s * q; /* 1 - tanh² u = 4 s (1 - s) */
  return s + (t == 0.0f ? 0.0f : 2.0f * x * t * du); /* t = 0 guards inf·0 when x² overflows */
}

/* ---------------------------------------------------------------------------------------------
 * gemm
 *
 * Decode-time products x · Wᵀ have a handful of rows x against a weight W stored [N, K] (every
 * Llama projection, every LM head). OpenBLAS streams W at 4-8 GB/s there, a third of the memory
 * bandwidth, so rows M ≤ SKINNY_M take a kernel that reads each row of W once and dots it with
 * the rows of x, four at a time, straight from L1.
 * ------------------------------------------------------------------------------------------- */

#define SKINNY_M 8

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* out[i] = a_i · b over K for the four rows a_i (two accumulators each, for FMA latency). */
static inline void dot4(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K, float out[4]) {
  __m256 s[8];
  for (int i = 0; i < 8; i++) s[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m256 x = _mm256_loadu_ps(b + k), y = _mm256_loadu_ps(b + k + 8);
    s[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + k), x, s[0]);
    s[1] = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + k), x, s[1]);
    s[2] = _mm256_fmadd_ps(_mm256_loadu_ps(a2 + k), x, s[2]);
    s[3] = _mm256_fmadd_ps(_mm256_loadu_ps(a3 + k), x, s[3]);
    s[4] = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + k + 8), y, s[4]);
    s[5] = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + k + 8), y, s[5]);
    s[6] = _mm256_fmadd_ps(_mm256_loadu_ps(a2 + k + 8), y, s[6]);
    s[7] = _mm256_fmadd_ps(_mm256_loadu_ps(a3 + k + 8), y, s[7]);
  }
  const float *a[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; i++) {
    float t = hsum8(_mm256_add_ps(s[i], s[i + 4]));
    for (int64_t kk = k; kk < K; kk++) t += a[i][kk] * b[kk];
    out[i] = t;
  }
}
#else
static inline void dot4(const float *b, const float *a0, const float *a1, const float *a2, const float *a3, int64_t K, float out[4]) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t k = 0; k < K; k++) s0 += a0[k] * b[k], s1 += a1[k] * b[k], s2 += a2[k] * b[k], s3 += a3[k] * b[k];
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}
#endif

typedef struct {
  int64_t M, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
} SkinnySpec;

/* Columns [lo, hi) of C = alpha · A · Bᵀ + beta · C. Each row of B is read once (B is the big
 * operand); rows past M in a block of four re-read the last row of A and are not stored. */
static void skinny_nt_cols(int64_t lo, int64_t hi, const SkinnySpec *g) {
  for (int64_t n = lo; n < hi; n++) {
    const float *b = g->B + n * g->ldb;
    for (int64_t m0 = 0; m0 < g->M; m0 += 4) {
      const float *a[4];
      for (int64_t i = 0; i < 4; i++) a[i] = g->A + (m0 + i < g->M ? m0 + i : g->M - 1) * g->lda;
      float d[4];
      dot4(b, a[0], a[1], a[2], a[3], g->K, d);
      for (int64_t i = 0; i < 4 && m0 + i < g->M; i++) {
        float *c = g->C + (m0 + i) * g->ldc + n;
        *c = g->beta == 0.0f ? g->alpha * d[i] : g->alpha * d[i] + g->beta * *c;
      }
    }
  }
}

static napi_value k_gemm(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "gemm", 16)) return NULL;
  bool tA = arg_bool(&c, 0, "transA"), tB = arg_bool(&c, 1, "transB");
  int64_t M = arg_int(&c, 2, "M", 0), N = arg_int(&c, 3, "N", 0), K = arg_int(&c, 4, "K", 0);
  double alpha = arg_number(&c, 5, "alpha");
  int64_t offA = arg_int(&c, 7, "offA", 0), lda = arg_int(&c, 8, "lda", 0);
  int64_t offB = arg_int(&c, 10, "offB", 0), ldb = arg_int(&c, 11, "ldb", 0);
  double beta = arg_number(&c, 12, "beta");
  int64_t offC = arg_int(&c, 14, "offC", 0), ldc = arg_int(&c, 15, "ldc", 0);
  if (c.failed) return NULL;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX) {
    fail(&c, true, "sizes and leading dimensions must be < 2^31");
    return NULL;
  }
  /* A is stored [rowsA, colsA] with row stride lda; likewise B and C. */
  int64_t rowsA = tA ? K : M, colsA = tA ? M : K;
  int64_t rowsB = tB ? N : K, colsB = tB ? K : N;
  int64_t minA = colsA > 1 ? colsA : 1, minB = colsB > 1 ? colsB : 1, minC = N > 1 ? N : 1;
  if (lda < minA) fail(&c, true, "lda = %lld is less than %lld, the row length of A as stored", (long long)lda, (long long)minA);
  if (ldb < minB) fail(&c, true, "ldb = %lld is less than %lld, the row length of B as stored", (long long)ldb, (long long)minB);
  if (ldc < minC) fail(&c, true, "ldc = %lld is less than N = %lld", (long long)ldc, (long long)minC);
  bool emptyA = rowsA == 0 || colsA == 0, emptyB = rowsB == 0 || colsB == 0, emptyC = M == 0 || N == 0;
  float *A = arg_f32(&c, 6, "A", emptyA ? 0 : (double)offA + (double)(rowsA - 1) * lda + colsA);
  float *B = arg_f32(&c, 9, "B", emptyB ? 0 : (double)offB + (double)(rowsB - 1) * ldb + colsB);
  float *C = arg_f32(&c, 13, "C", emptyC ? 0 : (double)offC + (double)(M - 1) * ldc + N);
  if (c.failed) return NULL;
  if (emptyC) return undefined(env);
  if (K == 0) {
    /* C = beta·C; OpenBLAS rejects K = 0 with lda = 1 on some paths, so do it here. */
    float b = (float)beta;
    for (int64_t i = 0; i < M; i++) {
      float *row = C + offC + i * ldc;
      for (int64_t j = 0; j < N; j++) row[j] = beta == 0.0 ? 0.0f : row[j] * b;
    }
    return undefined(env);
  }
  if (!tA && tB && M <= SKINNY_M) {
    SkinnySpec g = {M, K, lda, ldb, ldc, (float)alpha, (float)beta, A + offA, B + offB, C + offC};
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)M * N * K, N, skinny_nt_cols, &g);
    return undefined(env);
  }
#ifdef _OPENMP
  /* An OpenMP build of OpenBLAS sizes its team from the calling thread's ICV, which a worker
   * thread has not had set. */
  if (omp_get_max_threads() != threads()) omp_set_num_threads(threads());
#endif
  cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, (float)alpha,
              A + offA, (int)lda, B + offB, (int)ldb, (float)beta, C + offC, (int)ldc);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * binary: strided, broadcasting elementwise op into a dense output
 * ------------------------------------------------------------------------------------------- */

#define MAX_RANK 8

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };

static int read_dims(Call *c, size_t i, const char *name, int64_t *dst, int expect_rank) {
  if (c->failed) return 0;
  napi_value arr = c->argv[i];
  bool is_arr = false;
  napi_is_array(c->env, arr, &is_arr);
  if (!is_arr) {
    fail(c, false, "%s must be an Array of numbers, got %s", name, js_type_name(c, arr));
    return 0;
  }
  uint32_t rank;
  napi_get_array_length(c->env, arr, &rank);
  if (rank > MAX_RANK) {
    fail(c, true, "%s has rank %u, at most %d is supported", name, rank, MAX_RANK);
    return 0;
  }
  if (expect_rank >= 0 && (int)rank != expect_rank) {
    fail(c, true, "%s has %u entries, shape has %d", name, rank, expect_rank);
    return 0;
  }
  for (uint32_t d = 0; d < rank; d++) {
    napi_value e;
    double v;
    if (napi_get_element(c->env, arr, d, &e) != napi_ok || napi_get_value_double(c->env, e, &v) != napi_ok || !(v >= 0 && v <= 9007199254740992.0) ||
        v != floor(v)) {
      fail(c, true, "%s[%u] must be a non-negative integer", name, d);
      return 0;
    }
    dst[d] = (int64_t)v;
  }
  return (int)rank;
}

/* A binary op over a collapsed view: `rank` dims of `shape`, element strides `as`/`bs`. */
typedef struct {
  int op, rank;
  int64_t shape[MAX_RANK], as[MAX_RANK], bs[MAX_RANK];
} BinaryView;

/* Inner loop over `len` elements, specialised on the common stride patterns. */
#define BINARY_INNER(EXPR)                                                        \
  do {                                                                            \
    if (sa == 1 && sb == 1)                                                       \
      for (int64_t j = 0; j < len; j++) { float x = pa[j], y = pb[j]; po[j] = EXPR; } \
    else if (sa == 1 && sb == 0) {                                                \
      float y = pb[0];                                                            \
      for (int64_t j = 0; j < len; j++) { float x = pa[j]; po[j] = EXPR; }        \
    } else if (sa == 0 && sb == 1) {                                              \
      float x = pa[0];                                                            \
      for (int64_t j = 0; j < len; j++) { float y = pb[j]; po[j] = EXPR; }        \
    } else                                                                        \
      for (int64_t j = 0; j < len; j++) { float x = pa[j * sa], y = pb[j * sb]; po[j] = EXPR; } \
  } while (0)

/* Rows [lo, hi) of the view; a row is a multi-index over all dims but the last. */
static void binary_rows(int64_t lo, int64_t hi, const BinaryView *v, const float *a, const float *b, float *out) {
  int rank = v->rank;
  const int64_t *shape = v->shape, *as = v->as, *bs = v->bs;
  int64_t len = shape[rank - 1], sa = as[rank - 1], sb = bs[rank - 1];
  int64_t idx[MAX_RANK] = {0};
  int64_t oa = 0, ob = 0, rem = lo;
  for (int d = rank - 2; d >= 0; d--) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    oa += idx[d] * as[d];
    ob += idx[d] * bs[d];
  }
  for (int64_t row = lo; row < hi; row++) {
    const float *pa = a + oa, *pb = b + ob;
    float *po = out + row * len;
    switch (v->op) {
      case OP_ADD: BINARY_INNER(x + y); break;
      case OP_SUB: BINARY_INNER(x - y); break;
      case OP_MUL: BINARY_INNER(x * y); break;
      default: BINARY_INNER(x / y); break;
    }
    for (int d = rank - 2; d >= 0; d--) {
      oa += as[d];
      ob += bs[d];
      if (++idx[d] < shape[d]) break;
      oa -= shape[d] * as[d];
      ob -= shape[d] * bs[d];
      idx[d] = 0;
    }
  }
}

static napi_value k_binary(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "binary", 7)) return NULL;
  char opname[8];
  arg_string(&c, 0, "op", opname, sizeof opname);
  int op = !strcmp(opname, "add") ? OP_ADD : !strcmp(opname, "sub") ? OP_SUB : !strcmp(opname, "mul") ? OP_MUL : !strcmp(opname, "div") ? OP_DIV : -1;
  if (!c.failed && op < 0) fail(&c, true, "unknown binary op '%s'", opname);
  int64_t shape[MAX_RANK], as[MAX_RANK], bs[MAX_RANK];
  int rank = read_dims(&c, 1, "shape", shape, -1);
  read_dims(&c, 3, "aStrides", as, rank);
  read_dims(&c, 5, "bStrides", bs, rank);
  if (c.failed) return NULL;
  double n = 1, lastA = 0, lastB = 0;
  for (int d = 0; d < rank; d++) {
    n *= (double)shape[d];
    lastA += (double)(shape[d] - 1) * as[d];
    lastB += (double)(shape[d] - 1) * bs[d];
  }
  float *a = arg_f32(&c, 2, "a", n == 0 ? 0 : lastA + 1);
  float *b = arg_f32(&c, 4, "b", n == 0 ? 0 : lastB + 1);
  float *out = arg_f32(&c, 6, "out", n);
  if (c.failed || n == 0) return c.failed ? NULL : undefined(env);

  /* Drop size-1 dims and merge neighbours that are contiguous in both inputs (out is dense). */
  BinaryView v = {.op = op, .rank = 0};
  for (int d = 0; d < rank; d++) {
    int r = v.rank;
    if (shape[d] == 1) continue;
    if (r > 0 && v.as[r - 1] == as[d] * shape[d] && v.bs[r - 1] == bs[d] * shape[d]) {
      v.shape[r - 1] *= shape[d];
      v.as[r - 1] = as[d];
      v.bs[r - 1] = bs[d];
    } else {
      v.shape[r] = shape[d], v.as[r] = as[d], v.bs[r] = bs[d];
      v.rank++;
    }
  }
  if (v.rank == 0) v.shape[0] = 1, v.as[0] = 0, v.bs[0] = 0, v.rank = 1;
  PARALLEL_RANGE(n, (int64_t)n / v.shape[v.rank - 1], binary_rows, &v, a, b, out);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * unary, unaryBackward
 * ------------------------------------------------------------------------------------------- */

enum { U_GELU, U_SILU, U_RELU, U_EXP, U_LOG, U_TANH, U_NEG, U_SQRT, U_SQUARE };

static int unary_op(Call *c, size_t i) {
  char s[8];
  arg_string(c, i, "op", s, sizeof s);
  if (c->failed) return -1;
  static const char *names[] = {"gelu", "silu", "relu", "exp", "log", "tanh", "neg", "sqrt", "square"};
  for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
    if (!strcmp(s, names[k])) return k;
  fail(c, true, "unknown unary op '%s'", s);
  return -1;
}

#define UNARY_LOOP(EXPR)                     \
  for (int64_t i = lo; i < hi; i++) {        \
    float v = x[i];                          \
    out[i] = EXPR;                           \
  }                                          \
  break

static void unary_range(int64_t lo, int64_t hi, int op, const float *x, float *out) {
  switch (op) {
    case U_GELU: UNARY_LOOP(gelu_(v));
    case U_SILU: UNARY_LOOP(v * sigmoidf_(v));
    case U_RELU: UNARY_LOOP(v > 0.0f ? v : 0.0f);
    case U_EXP: UNARY_LOOP(fast_expf(v));
    case U_LOG: UNARY_LOOP(logf(v));
    case U_TANH: UNARY_LOOP(tanhf(v));
    case U_NEG: UNARY_LOOP(-v);
    case U_SQRT: UNARY_LOOP(sqrtf(v));
    default: UNARY_LOOP(v * v);
  }
}

static napi_value k_unary(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "unary", 4)) return NULL;
  int op = unary_op(&c, 0);
  int64_t n = arg_int(&c, 1, "n", 0);
  const float *x = arg_f32(&c, 2, "x", (double)n);
  float *out = arg_f32(&c, 3, "out", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, unary_range, op, x, out);
  return undefined(env);
}

/* gx += gy · f'(v), v = x[i]; DERIV may use `q`, `s` (declared by the caller's setup). */
#define UNARY_BACK_LOOP(DERIV)               \
  for (int64_t i = lo; i < hi; i++) {        \
    float v = x[i];                          \
    gx[i] += gy[i] * (DERIV);                \
  }                                          \
  break

static inline float silu_grad(float v) {
  float q, s = sigmoid_pair(v, &q);
  return s * (1.0f + v * q);
}

static inline float tanh_grad(float v) {
  float t = tanhf(v);
  return 1.0f - t * t;
}

static void unary_backward_range(int64_t lo, int64_t hi, int op, const float *x, const float *gy, float *gx) {
  switch (op) {
    case U_GELU: UNARY_BACK_LOOP(gelu_grad(v));
    case U_SILU: UNARY_BACK_LOOP(silu_grad(v));
    case U_RELU: UNARY_BACK_LOOP(v > 0.0f ? 1.0f : 0.0f);
    case U_EXP: UNARY_BACK_LOOP(fast_expf(v));
    case U_LOG: UNARY_BACK_LOOP(1.0f / v);
    case U_TANH: UNARY_BACK_LOOP(tanh_grad(v));
    case U_NEG:
      for (int64_t i = lo; i < hi; i++) gx[i] -= gy[i];
      break;
    case U_SQRT: UNARY_BACK_LOOP(0.5f / sqrtf(v));
    default: UNARY_BACK_LOOP(2.0f * v);
  }
}

static napi_value k_unary_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "unaryBackward", 5)) return NULL;
  int op = unary_op(&c, 0);
  int64_t n = arg_int(&c, 1, "n", 0);
  const float *x = arg_f32(&c, 2, "x", (double)n);
  const float *gy = arg_f32(&c, 3, "gy", (double)n);
  float *gx = arg_f32(&c, 4, "gx", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, unary_backward_range, op, x, gy, gx);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * axpy, scale, sumSquares, reduceSum
 * ------------------------------------------------------------------------------------------- */

/* In double so that alpha keeps all its bits, as in the reference. */
static void axpy_range(int64_t lo, int64_t hi, double alpha, const float *x, float *y) {
  for (int64_t i = lo; i < hi; i++) y[i] = (float)((double)y[i] + alpha * (double)x[i]);
}

static napi_value k_axpy(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "axpy", 4)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  double alpha = arg_number(&c, 1, "alpha");
  const float *x = arg_f32(&c, 2, "x", (double)n);
  float *y = arg_f32(&c, 3, "y", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, axpy_range, alpha, x, y);
  return undefined(env);
}

static void scale_range(int64_t lo, int64_t hi, double alpha, float *x) {
  for (int64_t i = lo; i < hi; i++) x[i] = (float)((double)x[i] * alpha);
}

static napi_value k_scale(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "scale", 3)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  double alpha = arg_number(&c, 1, "alpha");
  float *x = arg_f32(&c, 2, "x", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, scale_range, alpha, x);
  return undefined(env);
}

static double sum_squares_range(int64_t lo, int64_t hi, const float *x) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
  return s;
}

static napi_value k_sum_squares(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "sumSquares", 2)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *x = arg_f32(&c, 1, "x", (double)n);
  if (c.failed) return NULL;
  double s = 0;
  if (n >= PAR_MIN && threads() > 1) {
#pragma omp parallel num_threads(threads()) reduction(+ : s)
    {
      int64_t t = thread_index(), T = team_size();
      s += sum_squares_range(n * t / T, n * (t + 1) / T, x);
    }
  } else {
    s = sum_squares_range(0, n, x);
  }
  napi_value r;
  napi_create_double(env, s, &r);
  return r;
}

#define RS_BLOCK 256

/* Tasks [lo, hi) of reduceSum: task t sums block t % blocks of RS_BLOCK columns of slab t / blocks. */
static void reduce_sum_range(int64_t lo, int64_t hi, int64_t len, int64_t inner, const float *x, float *out, bool acc) {
  int64_t blocks = (inner + RS_BLOCK - 1) / RS_BLOCK;
  for (int64_t t = lo; t < hi; t++) {
    int64_t o = t / blocks, j0 = (t % blocks) * RS_BLOCK, j1 = j0 + RS_BLOCK < inner ? j0 + RS_BLOCK : inner;
    const float *xo = x + o * len * inner;
    float *po = out + o * inner;
    if (inner == 1) {
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t l = 0; l < len; l++) s += xo[l];
      po[0] = acc ? (float)(po[0] + s) : (float)s;
      continue;
    }
    double s[RS_BLOCK] = {0};
    for (int64_t l = 0; l < len; l++) {
      const float *row = xo + l * inner;
      for (int64_t j = j0; j < j1; j++) s[j - j0] += row[j];
    }
    for (int64_t j = j0; j < j1; j++) po[j] = acc ? (float)(po[j] + s[j - j0]) : (float)s[j - j0];
  }
}

static napi_value k_reduce_sum(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "reduceSum", 6)) return NULL;
  int64_t outer = arg_int(&c, 0, "outer", 0), len = arg_int(&c, 1, "len", 0), inner = arg_int(&c, 2, "inner", 0);
  const float *x = arg_f32(&c, 3, "x", (double)outer * len * inner);
  float *out = arg_f32(&c, 4, "out", (double)outer * inner);
  bool acc = arg_bool(&c, 5, "accumulate");
  if (c.failed) return NULL;
  int64_t tasks = outer * ((inner + RS_BLOCK - 1) / RS_BLOCK);
  PARALLEL_RANGE((double)outer * len * inner, tasks, reduce_sum_range, len, inner, x, out, acc);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * copy2d: strided row copies (slices, concatenation, KV-cache writes, broadcast rows)
 * ------------------------------------------------------------------------------------------- */

static void copy2d_rows(int64_t lo, int64_t hi, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd, bool acc) {
  for (int64_t r = lo; r < hi; r++) {
    const float *s = src + r * lds;
    float *d = dst + r * ldd;
    if (acc) {
#pragma omp simd
      for (int64_t j = 0; j < cols; j++) d[j] += s[j];
    } else {
      memcpy(d, s, (size_t)cols * sizeof(float));
    }
  }
}

static napi_value k_copy2d(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "copy2d", 9)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), cols = arg_int(&c, 1, "cols", 0);
  int64_t srcOff = arg_int(&c, 3, "srcOff", 0), lds = arg_int(&c, 4, "ldSrc", 0);
  int64_t dstOff = arg_int(&c, 6, "dstOff", 0), ldd = arg_int(&c, 7, "ldDst", 0);
  bool acc = arg_bool(&c, 8, "accumulate");
  if (!c.failed && rows > 1 && ldd < cols) fail(&c, true, "ldDst = %lld is less than cols = %lld: rows would overlap", (long long)ldd, (long long)cols);
  bool empty = rows == 0 || cols == 0;
  const float *src = arg_f32(&c, 2, "src", empty ? 0 : (double)srcOff + (double)(rows - 1) * lds + cols);
  float *dst = arg_f32(&c, 5, "dst", empty ? 0 : (double)dstOff + (double)(rows - 1) * ldd + cols);
  if (c.failed || empty) return c.failed ? NULL : undefined(env);
  PARALLEL_RANGE((double)rows * cols, rows, copy2d_rows, cols, src + srcOff, lds, dst + dstOff, ldd, acc);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * softmax, softmaxBackward
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t cols, rowPos0;
  float scale;
  bool causal;
  const uint8_t *km; /* key mask at kmOff, or NULL */
} SoftmaxSpec;

static void softmax_rows(int64_t lo, int64_t hi, const SoftmaxSpec *sp, const float *x, float *out) {
  int64_t cols = sp->cols;
  const uint8_t *km = sp->km;
  float scale = sp->scale;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * cols;
    float *o = out + r * cols;
    int64_t lim = cols;
    if (sp->causal) {
      int64_t last = sp->rowPos0 + r; /* the last visible column */
      lim = last < 0 ? 0 : (last + 1 < cols ? last + 1 : cols);
    }
    /* Pass 1: scaled logits, -inf where masked; the exp below turns those into exact zeros. */
    float m = -INFINITY;
    if (km) {
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < lim; j++) {
        float v = km[j] ? xr[j] * scale : -INFINITY;
        o[j] = v;
        m = v > m ? v : m;
      }
    } else {
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < lim; j++) {
        float v = xr[j] * scale;
        o[j] = v;
        m = v > m ? v : m;
      }
    }
    for (int64_t j = lim; j < cols; j++) o[j] = 0.0f;
    if (m == -INFINITY) { /* nothing visible (or only -inf logits): an all-zero row */
      for (int64_t j = 0; j < lim; j++) o[j] = 0.0f;
      continue;
    }
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < lim; j++) {
      float e = fast_expf(o[j] - m);
      o[j] = e;
      s += e;
    }
    float inv = (float)(1.0 / s);
    for (int64_t j = 0; j < lim; j++) o[j] *= inv;
  }
}

static napi_value k_softmax(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "softmax", 11)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), cols = arg_int(&c, 1, "cols", 0);
  int64_t xOff = arg_int(&c, 3, "xOff", 0), outOff = arg_int(&c, 5, "outOff", 0);
  SoftmaxSpec sp = {.cols = cols, .scale = (float)arg_number(&c, 6, "scale"), .causal = arg_bool(&c, 7, "causal")};
  sp.rowPos0 = arg_int(&c, 8, "rowPos0", -9007199254740992.0);
  int64_t kmOff = arg_int(&c, 10, "kmOff", 0);
  double n = (double)rows * cols;
  const float *x = arg_f32(&c, 2, "x", n == 0 ? 0 : xOff + n);
  float *out = arg_f32(&c, 4, "out", n == 0 ? 0 : outOff + n);
  if (!c.failed) {
    napi_valuetype t;
    napi_typeof(env, c.argv[9], &t);
    if (t != napi_null && t != napi_undefined) {
      const uint8_t *km = arg_typed(&c, 9, "keyMask", napi_uint8_array, cols == 0 ? 0 : (double)kmOff + cols, NULL);
      if (km) sp.km = km + kmOff;
    }
  }
  if (c.failed || n == 0) return c.failed ? NULL : undefined(env);
  PARALLEL_RANGE(n, rows, softmax_rows, &sp, x + xOff, out + outOff);
  return undefined(env);
}

static void softmax_backward_rows(int64_t lo, int64_t hi, int64_t cols, float scale, const float *y, const float *gy, float *gx) {
  for (int64_t r = lo; r < hi; r++) {
    const float *yr = y + r * cols, *gr = gy + r * cols;
    float *o = gx + r * cols;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < cols; j++) dot += (double)gr[j] * yr[j];
    float d = (float)dot;
    for (int64_t j = 0; j < cols; j++) o[j] += scale * yr[j] * (gr[j] - d);
  }
}

static napi_value k_softmax_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "softmaxBackward", 9)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), cols = arg_int(&c, 1, "cols", 0);
  int64_t yOff = arg_int(&c, 3, "yOff", 0), gyOff = arg_int(&c, 5, "gyOff", 0), gxOff = arg_int(&c, 7, "gxOff", 0);
  float scale = (float)arg_number(&c, 8, "scale");
  double n = (double)rows * cols;
  const float *y = arg_f32(&c, 2, "y", n == 0 ? 0 : yOff + n);
  const float *gy = arg_f32(&c, 4, "gy", n == 0 ? 0 : gyOff + n);
  float *gx = arg_f32(&c, 6, "gx", n == 0 ? 0 : gxOff + n);
  if (c.failed || n == 0) return c.failed ? NULL : undefined(env);
  PARALLEL_RANGE(n, rows, softmax_backward_rows, cols, scale, y + yOff, gy + gyOff, gx + gxOff);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * attention, attentionBackward: every (batch, head) in one call. Per head the products are
 * cblas_sgemm calls on strided views of the [B, T, H, D] / [B, Smax, Hkv, D] layouts, except at
 * decode time (T = 1), where dot products over the KV cache beat GEMM calls. Heads run in
 * parallel (OpenBLAS then stays on one thread inside each), the backward per key/value head so
 * that the query heads sharing it add into its gradient one after another.
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t B, T, S, Smax, H, Hkv, D, pastLen;
  float scale;
  bool causal;
  const uint8_t *km; /* [B, Smax] or NULL */
  const float *q, *k, *v; /* [B, T, H, D], [B, Smax, Hkv, D] x2 */
} AttnSpec;

static inline int64_t attn_group(const AttnSpec *a) { return a->H / a->Hkv; }

/* Tasks are (b, h) heads: per head a GEMM for the scores, the masked softmax, a GEMM for P · V. */
static void attention_heads(int64_t lo, int64_t hi, const AttnSpec *a, float *P, float *out) {
  int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D;
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->H, h = task % a->H, g = h / attn_group(a);
    const float *qh = a->q + b * T * ldq + h * D;
    const float *kh = a->k + b * a->Smax * ldk + g * D, *vh = a->v + b * a->Smax * ldk + g * D;
    float *Ph = P + task * T * S, *oh = out + b * T * ldq + h * D;
    SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL};
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)S, (int)D, 1.0f, qh, (int)ldq, kh, (int)ldk, 0.0f, Ph, (int)S);
    softmax_rows(0, T, &sp, Ph, Ph);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)S, 1.0f, Ph, (int)S, vh, (int)ldk, 0.0f, oh, (int)ldq);
  }
}

/* Decode (T = 1), tasks are batch rows: the keys and then the values of a row are streamed once,
 * in memory order, for all its heads; a dot product per (key, head) instead of GEMM calls. */
static void attention_decode_rows(int64_t lo, int64_t hi, const AttnSpec *a, float *P, float *out) {
  int64_t S = a->S, D = a->D, H = a->H, ldk = a->Hkv * D, G = attn_group(a);
  int64_t lim = a->causal ? (a->pastLen < 0 ? 0 : (a->pastLen + 1 < S ? a->pastLen + 1 : S)) : S;
  for (int64_t b = lo; b < hi; b++) {
    const float *qb = a->q + b * H * D, *kb = a->k + b * a->Smax * ldk, *vb = a->v + b * a->Smax * ldk;
    float *Pb = P + b * H * S, *ob = out + b * H * D;
    for (int64_t s = 0; s < lim; s++) {
      for (int64_t h = 0; h < H; h++) {
        const float *qh = qb + h * D, *ks = kb + s * ldk + (h / G) * D;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; d++) dot += qh[d] * ks[d];
        Pb[h * S + s] = dot;
      }
    }
    SoftmaxSpec sp = {.cols = S, .rowPos0 = a->pastLen, .scale = a->scale, .causal = a->causal, .km = a->km ? a->km + b * a->Smax : NULL};
    for (int64_t h = 0; h < H; h++) softmax_rows(0, 1, &sp, Pb + h * S, Pb + h * S);
    memset(ob, 0, (size_t)(H * D) * sizeof(float));
    for (int64_t s = 0; s < lim; s++) {
      for (int64_t h = 0; h < H; h++) {
        float p = Pb[h * S + s];
        if (p == 0.0f) continue;
        const float *vs = vb + s * ldk + (h / G) * D;
        float *oh = ob + h * D;
#pragma omp simd
        for (int64_t d = 0; d < D; d++) oh[d] += p * vs[d];
      }
    }
  }
}

/* Parses the arguments shared by attention and attentionBackward (sizes, q, k, v, P). */
static AttnSpec attn_args(Call *c, float **P) {
  AttnSpec a = {0};
  a.B = arg_int(c, 0, "B", 0), a.T = arg_int(c, 1, "T", 0), a.S = arg_int(c, 2, "S", 0), a.Smax = arg_int(c, 3, "Smax", 0);
  a.H = arg_int(c, 4, "H", 0), a.Hkv = arg_int(c, 5, "Hkv", 0), a.D = arg_int(c, 6, "D", 0);
  if (!c->failed && a.S > a.Smax) fail(c, true, "S = %lld is larger than Smax = %lld", (long long)a.S, (long long)a.Smax);
  if (!c->failed && (a.Hkv == 0 ? a.H != 0 : a.H % a.Hkv != 0)) fail(c, true, "H = %lld is not a multiple of Hkv = %lld", (long long)a.H, (long long)a.Hkv);
  if (!c->failed && (a.T > INT32_MAX || a.S > INT32_MAX || a.D > INT32_MAX || a.H * a.D > INT32_MAX)) fail(c, true, "sizes must be < 2^31");
  double nq = (double)a.B * a.T * a.H * a.D, nk = (double)a.B * a.Smax * a.Hkv * a.D;
  a.q = arg_f32(c, 7, "q", nq), a.k = arg_f32(c, 8, "k", nk), a.v = arg_f32(c, 9, "v", nk);
  *P = arg_f32(c, 10, "P", (double)a.B * a.H * a.T * a.S);
  return a;
}

static napi_value k_attention(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "attention", 16)) return NULL;
  float *P;
  AttnSpec a = attn_args(&c, &P);
  float *out = arg_f32(&c, 11, "out", (double)a.B * a.T * a.H * a.D);
  if (!c.failed) {
    napi_valuetype t;
    napi_typeof(env, c.argv[12], &t);
    if (t != napi_null && t != napi_undefined) a.km = arg_typed(&c, 12, "keyMask", napi_uint8_array, (double)a.B * a.Smax, NULL);
  }
  a.causal = arg_bool(&c, 13, "causal");
  a.pastLen = arg_int(&c, 14, "pastLen", -9007199254740992.0);
  a.scale = (float)arg_number(&c, 15, "scale");
  if (c.failed) return NULL;
  if (a.S == 0) { /* no keys: every output row is 0 */
    memset(out, 0, (size_t)(a.B * a.T * a.H * a.D) * sizeof(float));
    return undefined(env);
  }
  if (a.T == 1)
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)a.B * a.H * a.S * a.D, a.B, attention_decode_rows, &a, P, out);
  else
    PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)a.B * a.H * a.T * a.S * a.D, a.B * a.H, attention_heads, &a, P, out);
  return undefined(env);
}

typedef struct {
  const float *P, *gO;
  float *gq, *gk, *gv; /* NULL = not wanted */
  float *scratch;      /* T·S floats per thread, for dP and then dS */
} AttnGrads;

/* Tasks are (b, g) key/value heads. */
static void attention_backward_groups(int64_t lo, int64_t hi, const AttnSpec *a, const AttnGrads *gr) {
  int64_t T = a->T, S = a->S, D = a->D, ldq = a->H * D, ldk = a->Hkv * D, G = attn_group(a);
  float *dS = gr->scratch + thread_index() * T * S;
  for (int64_t task = lo; task < hi; task++) {
    int64_t b = task / a->Hkv, g = task % a->Hkv;
    const float *kg = a->k + b * a->Smax * ldk + g * D, *vg = a->v + b * a->Smax * ldk + g * D;
    float *gkg = gr->gk ? gr->gk + b * a->Smax * ldk + g * D : NULL, *gvg = gr->gv ? gr->gv + b * a->Smax * ldk + g * D : NULL;
    for (int64_t h = g * G; h < (g + 1) * G; h++) {
      int64_t off = b * T * ldq + h * D;
      const float *Ph = gr->P + (b * a->H + h) * T * S, *gOh = gr->gO + off, *qh = a->q + off;
      /* dV += Pᵀ · dO */
      if (gvg) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)D, (int)T, 1.0f, Ph, (int)S, gOh, (int)ldq, 1.0f, gvg, (int)ldk);
      if (!gr->gq && !gkg) continue;
      /* dP = dO · Vᵀ, then dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)) in place */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)S, (int)D, 1.0f, gOh, (int)ldq, vg, (int)ldk, 0.0f, dS, (int)S);
      for (int64_t t = 0; t < T; t++) {
        float *row = dS + t * S;
        const float *pr = Ph + t * S;
        double dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t s = 0; s < S; s++) dot += (double)row[s] * pr[s];
        float dt = (float)dot;
        for (int64_t s = 0; s < S; s++) row[s] = a->scale * pr[s] * (row[s] - dt);
      }
      /* dQ += dS · K;  dK += dSᵀ · Q */
      if (gr->gq) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)D, (int)S, 1.0f, dS, (int)S, kg, (int)ldk, 1.0f, gr->gq + off, (int)ldq);
      if (gkg) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)D, (int)T, 1.0f, dS, (int)S, qh, (int)ldq, 1.0f, gkg, (int)ldk);
    }
  }
}

/* A gradient buffer argument that may be null (not wanted). */
static float *arg_f32_or_null(Call *c, size_t i, const char *name, double need) {
  if (c->failed) return NULL;
  napi_valuetype t;
  napi_typeof(c->env, c->argv[i], &t);
  return t == napi_null || t == napi_undefined ? NULL : arg_f32(c, i, name, need);
}

static napi_value k_attention_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "attentionBackward", 16)) return NULL;
  AttnGrads gr = {0};
  float *P;
  AttnSpec a = attn_args(&c, &P);
  gr.P = P;
  double nq = (double)a.B * a.T * a.H * a.D, nk = (double)a.B * a.Smax * a.Hkv * a.D;
  gr.gO = arg_f32(&c, 11, "gOut", nq);
  a.scale = (float)arg_number(&c, 12, "scale");
  gr.gq = arg_f32_or_null(&c, 13, "gq", nq);
  gr.gk = arg_f32_or_null(&c, 14, "gk", nk);
  gr.gv = arg_f32_or_null(&c, 15, "gv", nk);
  if (c.failed || a.S == 0 || a.T == 0) return c.failed ? NULL : undefined(env);
  gr.scratch = malloc((size_t)(threads() * a.T * a.S) * sizeof(float));
  if (gr.scratch == NULL) {
    napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.attentionBackward: out of memory");
    return NULL;
  }
  PARALLEL_RANGE_ABOVE(PAR_MIN_FLOPS, (double)a.B * a.H * a.T * a.S * a.D, a.B * a.Hkv, attention_backward_groups, &a, &gr);
  free(gr.scratch);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * logSoftmaxGather, logSoftmaxGatherBackward, entropy
 * ------------------------------------------------------------------------------------------- */

/* Throws unless every target is < V (negative targets mean "ignored"). */
static void check_targets(Call *c, const int32_t *t, int64_t rows, int64_t V) {
  if (c->failed) return;
  for (int64_t r = 0; r < rows; r++)
    if (t[r] >= V) {
      fail(c, true, "targets[%lld] = %d is out of range, V = %lld", (long long)r, t[r], (long long)V);
      return;
    }
}

static void log_softmax_gather_rows(int64_t lo, int64_t hi, int64_t V, const float *logits, const int32_t *targets, float *logp, float *lse) {
  for (int64_t r = lo; r < hi; r++) {
    const float *l = logits + r * V;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t v = 0; v < V; v++) m = l[v] > m ? l[v] : m;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; v++) s += fast_expf(l[v] - m);
    float lr = (float)((double)m + log(s)); /* logp uses the stored lse, as the backward does */
    lse[r] = lr;
    logp[r] = targets[r] < 0 ? 0.0f : (float)((double)l[targets[r]] - lr);
  }
}

static napi_value k_log_softmax_gather(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "logSoftmaxGather", 6)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), V = arg_int(&c, 1, "V", 0);
  if (!c.failed && rows > 0 && V == 0) fail(&c, true, "V must be > 0");
  const float *logits = arg_f32(&c, 2, "logits", (double)rows * V);
  const int32_t *targets = arg_i32(&c, 3, "targets", (double)rows);
  float *logp = arg_f32(&c, 4, "logp", (double)rows);
  float *lse = arg_f32(&c, 5, "lse", (double)rows);
  check_targets(&c, targets, rows, V);
  if (c.failed) return NULL;
  PARALLEL_RANGE((double)rows * V, rows, log_softmax_gather_rows, V, logits, targets, logp, lse);
  return undefined(env);
}

static void log_softmax_gather_backward_rows(int64_t lo, int64_t hi, int64_t V, const float *logits, const float *lse, const int32_t *targets,
                                             const float *gLogp, float *gLogits) {
  for (int64_t r = lo; r < hi; r++) {
    int32_t t = targets[r];
    if (t < 0) continue;
    const float *l = logits + r * V;
    float *g = gLogits + r * V, gr = gLogp[r], lr = lse[r];
    for (int64_t v = 0; v < V; v++) g[v] -= gr * fast_expf(l[v] - lr);
    g[t] += gr;
  }
}

static napi_value k_log_softmax_gather_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "logSoftmaxGatherBackward", 7)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), V = arg_int(&c, 1, "V", 0);
  const float *logits = arg_f32(&c, 2, "logits", (double)rows * V);
  const float *lse = arg_f32(&c, 3, "lse", (double)rows);
  const int32_t *targets = arg_i32(&c, 4, "targets", (double)rows);
  const float *gLogp = arg_f32(&c, 5, "gLogp", (double)rows);
  float *gLogits = arg_f32(&c, 6, "gLogits", (double)rows * V);
  check_targets(&c, targets, rows, V);
  if (c.failed) return NULL;
  PARALLEL_RANGE((double)rows * V, rows, log_softmax_gather_backward_rows, V, logits, lse, targets, gLogp, gLogits);
  return undefined(env);
}

static void entropy_rows(int64_t lo, int64_t hi, int64_t V, const float *logits, const float *lse, float *out) {
  for (int64_t r = lo; r < hi; r++) {
    const float *l = logits + r * V;
    float lr = lse[r];
    double h = 0;
#pragma omp simd reduction(+ : h)
    for (int64_t v = 0; v < V; v++) {
      float lp = l[v] - lr, p = fast_expf(lp);
      h -= p > 0.0f ? (double)(p * lp) : 0.0; /* p = 0 (a -inf logit) contributes 0, not NaN */
    }
    out[r] = (float)h;
  }
}

static napi_value k_entropy(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "entropy", 5)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), V = arg_int(&c, 1, "V", 0);
  const float *logits = arg_f32(&c, 2, "logits", (double)rows * V);
  const float *lse = arg_f32(&c, 3, "lse", (double)rows);
  float *out = arg_f32(&c, 4, "out", (double)rows);
  if (c.failed) return NULL;
  PARALLEL_RANGE((double)rows * V, rows, entropy_rows, V, logits, lse, out);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * rmsnorm, layernorm and their backwards. Parameter gradients (gw, gb) are summed over rows in
 * blocks of columns, one block per task, so threads never write the same element.
 * ------------------------------------------------------------------------------------------- */

#define COL_BLOCK 64

static void rmsnorm_rows(int64_t lo, int64_t hi, int64_t C, const float *x, const float *w, double eps, float *out, float *rstd) {
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C;
    float *o = out + r * C;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < C; j++) ss += (double)xr[j] * xr[j];
    float rs = (float)(1.0 / sqrt(ss / (double)C + eps));
    rstd[r] = rs;
    for (int64_t j = 0; j < C; j++) o[j] = xr[j] * rs * w[j];
  }
}

static napi_value k_rmsnorm(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "rmsnorm", 7)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), C = arg_int(&c, 1, "C", 0);
  double n = (double)rows * C;
  const float *x = arg_f32(&c, 2, "x", n);
  const float *w = arg_f32(&c, 3, "w", (double)C);
  double eps = arg_number(&c, 4, "eps");
  float *out = arg_f32(&c, 5, "out", n);
  float *rstd = arg_f32(&c, 6, "rstd", (double)rows);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, rmsnorm_rows, C, x, w, eps, out, rstd);
  return undefined(env);
}

/* gx += rstd·w·gy − x · rstd³/C · Σ_j gy_j w_j x_j */
static void rmsnorm_backward_rows(int64_t lo, int64_t hi, int64_t C, const float *x, const float *w, const float *rstd, const float *gy, float *gx) {
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C, *gr = gy + r * C;
    float *o = gx + r * C;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < C; j++) dot += (double)gr[j] * w[j] * xr[j];
    double rs = rstd[r];
    float k = (float)(dot * rs * rs * rs / (double)C), rsf = rstd[r];
    for (int64_t j = 0; j < C; j++) o[j] += rsf * w[j] * gr[j] - k * xr[j];
  }
}

/* gw[j] += Σ_r gy[r,j] · x[r,j] · rstd[r] for the column blocks [lo, hi). */
static void rmsnorm_gw_blocks(int64_t lo, int64_t hi, int64_t rows, int64_t C, const float *x, const float *rstd, const float *gy, float *gw) {
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    double acc[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + r * C, *gr = gy + r * C;
      double rs = rstd[r];
      for (int64_t j = j0; j < j1; j++) acc[j - j0] += (double)gr[j] * xr[j] * rs;
    }
    for (int64_t j = j0; j < j1; j++) gw[j] = (float)(gw[j] + acc[j - j0]);
  }
}

static napi_value k_rmsnorm_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "rmsnormBackward", 8)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), C = arg_int(&c, 1, "C", 0);
  double n = (double)rows * C;
  const float *x = arg_f32(&c, 2, "x", n);
  const float *w = arg_f32(&c, 3, "w", (double)C);
  const float *rstd = arg_f32(&c, 4, "rstd", (double)rows);
  const float *gy = arg_f32(&c, 5, "gy", n);
  float *gx = arg_f32(&c, 6, "gx", n);
  float *gw = arg_f32(&c, 7, "gw", (double)C);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, rmsnorm_backward_rows, C, x, w, rstd, gy, gx);
  PARALLEL_RANGE(n, (C + COL_BLOCK - 1) / COL_BLOCK, rmsnorm_gw_blocks, rows, C, x, rstd, gy, gw);
  return undefined(env);
}

static void layernorm_rows(int64_t lo, int64_t hi, int64_t C, const float *x, const float *w, const float *b, double eps, float *out, float *mean,
                           float *rstd) {
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C;
    float *o = out + r * C;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; j++) s += xr[j];
    double mu = s / (double)C, v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < C; j++) v += ((double)xr[j] - mu) * ((double)xr[j] - mu);
    double rs = 1.0 / sqrt(v / (double)C + eps);
    mean[r] = (float)mu;
    rstd[r] = (float)rs;
    /* In double: x − mean cancels when x is near the mean. */
    for (int64_t j = 0; j < C; j++) o[j] = (float)(((double)xr[j] - mu) * rs * w[j] + b[j]);
  }
}

static napi_value k_layernorm(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "layernorm", 9)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), C = arg_int(&c, 1, "C", 0);
  double n = (double)rows * C;
  const float *x = arg_f32(&c, 2, "x", n);
  const float *w = arg_f32(&c, 3, "w", (double)C);
  const float *b = arg_f32(&c, 4, "b", (double)C);
  double eps = arg_number(&c, 5, "eps");
  float *out = arg_f32(&c, 6, "out", n);
  float *mean = arg_f32(&c, 7, "mean", (double)rows);
  float *rstd = arg_f32(&c, 8, "rstd", (double)rows);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, layernorm_rows, C, x, w, b, eps, out, mean, rstd);
  return undefined(env);
}

/* With xhat = (x − mean)·rstd and d = gy·w: gx += rstd · (d − mean(d) − xhat · mean(d · xhat)). */
static void layernorm_backward_rows(int64_t lo, int64_t hi, int64_t C, const float *x, const float *w, const float *mean, const float *rstd, const float *gy,
                                    float *gx) {
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C, *gr = gy + r * C;
    float *o = gx + r * C;
    float mu = mean[r], rs = rstd[r];
    double sd = 0, sdx = 0;
#pragma omp simd reduction(+ : sd, sdx)
    for (int64_t j = 0; j < C; j++) {
      float d = gr[j] * w[j], xh = (xr[j] - mu) * rs;
      sd += d;
      sdx += (double)d * xh;
    }
    float md = (float)(sd / (double)C), mdx = (float)(sdx / (double)C);
    for (int64_t j = 0; j < C; j++) {
      float d = gr[j] * w[j], xh = (xr[j] - mu) * rs;
      o[j] += rs * (d - md - xh * mdx);
    }
  }
}

/* gw[j] += Σ_r gy · xhat and gb[j] += Σ_r gy for the column blocks [lo, hi). */
static void layernorm_gwb_blocks(int64_t lo, int64_t hi, int64_t rows, int64_t C, const float *x, const float *mean, const float *rstd, const float *gy,
                                 float *gw, float *gb) {
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    double aw[COL_BLOCK] = {0}, ab[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + r * C, *gr = gy + r * C;
      float mu = mean[r], rs = rstd[r];
      for (int64_t j = j0; j < j1; j++) {
        aw[j - j0] += (double)gr[j] * ((xr[j] - mu) * rs);
        ab[j - j0] += gr[j];
      }
    }
    for (int64_t j = j0; j < j1; j++) {
      gw[j] = (float)(gw[j] + aw[j - j0]);
      gb[j] = (float)(gb[j] + ab[j - j0]);
    }
  }
}

static napi_value k_layernorm_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "layernormBackward", 10)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), C = arg_int(&c, 1, "C", 0);
  double n = (double)rows * C;
  const float *x = arg_f32(&c, 2, "x", n);
  const float *w = arg_f32(&c, 3, "w", (double)C);
  const float *mean = arg_f32(&c, 4, "mean", (double)rows);
  const float *rstd = arg_f32(&c, 5, "rstd", (double)rows);
  const float *gy = arg_f32(&c, 6, "gy", n);
  float *gx = arg_f32(&c, 7, "gx", n);
  float *gw = arg_f32(&c, 8, "gw", (double)C);
  float *gb = arg_f32(&c, 9, "gb", (double)C);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, layernorm_backward_rows, C, x, w, mean, rstd, gy, gx);
  PARALLEL_RANGE(n, (C + COL_BLOCK - 1) / COL_BLOCK, layernorm_gwb_blocks, rows, C, x, mean, rstd, gy, gw, gb);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * rope, ropeBackward
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t H, D;
  const int32_t *pos;
  const float *cos, *sin; /* [maxPos, D/2] */
} RopeSpec;

/* Parses the arguments shared by rope and ropeBackward; positions are checked against the tables. */
static RopeSpec rope_args(Call *c, int64_t *rows) {
  RopeSpec sp = {0};
  *rows = arg_int(c, 0, "rows", 0), sp.H = arg_int(c, 1, "H", 0), sp.D = arg_int(c, 2, "D", 0);
  if (!c->failed && sp.D % 2) fail(c, true, "D = %lld must be even", (long long)sp.D);
  sp.pos = arg_i32(c, 4, "positions", (double)*rows);
  size_t nc, ns;
  sp.cos = arg_f32_table(c, 5, "cos", &nc);
  sp.sin = arg_f32_table(c, 6, "sin", &ns);
  int64_t half = sp.D / 2;
  if (c->failed || half == 0 || sp.H == 0) return sp;
  size_t maxPos = (nc < ns ? nc : ns) / (size_t)half;
  for (int64_t r = 0; r < *rows; r++)
    if (sp.pos[r] < 0 || (size_t)sp.pos[r] >= maxPos) {
      fail(c, true, "positions[%lld] = %d is outside the cos/sin tables of %zu positions", (long long)r, sp.pos[r], maxPos);
      break;
    }
  return sp;
}

static void rope_rows(int64_t lo, int64_t hi, const RopeSpec *sp, const float *x, float *out) {
  int64_t H = sp->H, D = sp->D, half = D / 2;
  for (int64_t r = lo; r < hi; r++) {
    const float *cr = sp->cos + (int64_t)sp->pos[r] * half, *sr = sp->sin + (int64_t)sp->pos[r] * half;
    for (int64_t h = 0; h < H; h++) {
      const float *xh = x + (r * H + h) * D;
      float *o = out + (r * H + h) * D;
      for (int64_t i = 0; i < half; i++) {
        float a = xh[i], b = xh[i + half]; /* read both first: out may alias x */
        o[i] = a * cr[i] - b * sr[i];
        o[i + half] = b * cr[i] + a * sr[i];
      }
    }
  }
}

static napi_value k_rope(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "rope", 8)) return NULL;
  int64_t rows;
  RopeSpec sp = rope_args(&c, &rows);
  double n = (double)rows * sp.H * sp.D;
  const float *x = arg_f32(&c, 3, "x", n);
  float *out = arg_f32(&c, 7, "out", n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, rope_rows, &sp, x, out);
  return undefined(env);
}

static void rope_backward_rows(int64_t lo, int64_t hi, const RopeSpec *sp, const float *gy, float *gx) {
  int64_t H = sp->H, D = sp->D, half = D / 2;
  for (int64_t r = lo; r < hi; r++) {
    const float *cr = sp->cos + (int64_t)sp->pos[r] * half, *sr = sp->sin + (int64_t)sp->pos[r] * half;
    for (int64_t h = 0; h < H; h++) {
      const float *g = gy + (r * H + h) * D;
      float *o = gx + (r * H + h) * D;
      for (int64_t i = 0; i < half; i++) {
        float a = g[i], b = g[i + half];
        o[i] += a * cr[i] + b * sr[i];
        o[i + half] += b * cr[i] - a * sr[i];
      }
    }
  }
}

static napi_value k_rope_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "ropeBackward", 8)) return NULL;
  int64_t rows;
  RopeSpec sp = rope_args(&c, &rows);
  double n = (double)rows * sp.H * sp.D;
  const float *gy = arg_f32(&c, 3, "gy", n);
  float *gx = arg_f32(&c, 7, "gx", n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, rows, rope_backward_rows, &sp, gy, gx);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * swiglu, swigluBackward
 * ------------------------------------------------------------------------------------------- */

static void swiglu_range(int64_t lo, int64_t hi, const float *g, const float *u, float *out) {
  for (int64_t i = lo; i < hi; i++) out[i] = g[i] * sigmoidf_(g[i]) * u[i];
}

static napi_value k_swiglu(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "swiglu", 4)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *g = arg_f32(&c, 1, "gate", (double)n);
  const float *u = arg_f32(&c, 2, "up", (double)n);
  float *out = arg_f32(&c, 3, "out", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, swiglu_range, g, u, out);
  return undefined(env);
}

static void swiglu_backward_range(int64_t lo, int64_t hi, const float *g, const float *u, const float *gy, float *gg, float *gu) {
  for (int64_t i = lo; i < hi; i++) {
    float x = g[i], q, s = sigmoid_pair(x, &q);
    gg[i] += gy[i] * u[i] * s * (1.0f + x * q);
    gu[i] += gy[i] * x * s;
  }
}

static napi_value k_swiglu_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "swigluBackward", 6)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *g = arg_f32(&c, 1, "gate", (double)n);
  const float *u = arg_f32(&c, 2, "up", (double)n);
  const float *gy = arg_f32(&c, 3, "gy", (double)n);
  float *gg = arg_f32(&c, 4, "gGate", (double)n);
  float *gu = arg_f32(&c, 5, "gUp", (double)n);
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, swiglu_backward_range, g, u, gy, gg, gu);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * embedding, embeddingBackward
 * ------------------------------------------------------------------------------------------- */

/* Checks every id indexes a row of W (which has `len` elements, C per row). */
static void check_ids(Call *c, const int32_t *ids, int64_t n, int64_t C, size_t len) {
  if (c->failed || C == 0) return;
  int64_t V = (int64_t)(len / (size_t)C);
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V) {
      fail(c, true, "ids[%lld] = %d is outside the %lld rows of the table", (long long)i, ids[i], (long long)V);
      return;
    }
}

static void embedding_rows(int64_t lo, int64_t hi, int64_t C, const int32_t *ids, const float *W, float *out) {
  for (int64_t i = lo; i < hi; i++) memcpy(out + i * C, W + (int64_t)ids[i] * C, (size_t)C * sizeof(float));
}

static napi_value k_embedding(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "embedding", 5)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0), C = arg_int(&c, 1, "C", 0);
  const int32_t *ids = arg_i32(&c, 2, "ids", (double)n);
  size_t len;
  const float *W = arg_f32_table(&c, 3, "W", &len);
  float *out = arg_f32(&c, 4, "out", (double)n * C);
  check_ids(&c, ids, n, C, len);
  if (c.failed) return NULL;
  PARALLEL_RANGE((double)n * C, n, embedding_rows, C, ids, W, out);
  return undefined(env);
}

/* Column blocks [lo, hi): repeated ids stay race-free and summed in the reference's order. */
static void embedding_backward_blocks(int64_t lo, int64_t hi, int64_t n, int64_t C, const int32_t *ids, const float *gy, float *gW) {
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    for (int64_t i = 0; i < n; i++) {
      float *dst = gW + (int64_t)ids[i] * C;
      const float *src = gy + i * C;
      for (int64_t j = j0; j < j1; j++) dst[j] += src[j];
    }
  }
}

static napi_value k_embedding_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "embeddingBackward", 5)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0), C = arg_int(&c, 1, "C", 0);
  const int32_t *ids = arg_i32(&c, 2, "ids", (double)n);
  const float *gy = arg_f32(&c, 3, "gy", (double)n * C);
  size_t len;
  float *gW = arg_f32_table(&c, 4, "gW", &len);
  check_ids(&c, ids, n, C, len);
  if (c.failed) return NULL;
  PARALLEL_RANGE((double)n * C, (C + COL_BLOCK - 1) / COL_BLOCK, embedding_backward_blocks, n, C, ids, gy, gW);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * adamw
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  double lr, b1, b2, eps, wd, bc1, bc2;
} AdamSpec;

/* Float arithmetic, vectorised: the update is memory-bound at 124M parameters only this way
 * (double division and square root made it ~3x slower). Agrees with the reference to ~1 ulp. */
static void adamw_range(int64_t lo, int64_t hi, const AdamSpec *h, float *p, const float *g, float *m, float *v) {
  float decay = (float)(1.0 - h->lr * h->wd), b1 = (float)h->b1, b2 = (float)h->b2, c1 = (float)(1.0 - h->b1), c2 = (float)(1.0 - h->b2);
  float step = (float)(h->lr / h->bc1), rbc2 = (float)(1.0 / h->bc2), eps = (float)h->eps;
#pragma omp simd
  for (int64_t i = lo; i < hi; i++) {
    float gi = g[i];
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (sqrtf(vi * rbc2) + eps);
  }
}

static napi_value k_adamw(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "adamw", 12)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  float *p = arg_f32(&c, 1, "p", (double)n);
  const float *g = arg_f32(&c, 2, "g", (double)n);
  float *m = arg_f32(&c, 3, "m", (double)n);
  float *v = arg_f32(&c, 4, "v", (double)n);
  AdamSpec h = {arg_number(&c, 5, "lr"), arg_number(&c, 6, "b1"),  arg_number(&c, 7, "b2"),  arg_number(&c, 8, "eps"),
                arg_number(&c, 9, "wd"), arg_number(&c, 10, "bc1"), arg_number(&c, 11, "bc2")};
  if (c.failed) return NULL;
  PARALLEL_RANGE(n, n, adamw_range, &h, p, g, m, v);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * topk: a size-k heap whose root is the worst kept entry ("worse" = smaller value, then larger
 * index; NaN is worse than any number), then heap-sorted into best-first order. O(n log k).
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  float v;
  int32_t i;
} Entry;

static inline bool worse(Entry a, Entry b) {
  if (isnan(a.v) != isnan(b.v)) return isnan(a.v);
  if (a.v != b.v && !isnan(a.v)) return a.v < b.v;
  return a.i > b.i;
}

static void sift_down(Entry *h, int64_t k, int64_t i) {
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, w = i;
    if (l < k && worse(h[l], h[w])) w = l;
    if (r < k && worse(h[r], h[w])) w = r;
    if (w == i) return;
    Entry t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

/* Rows [lo, hi); `heaps` has k entries of scratch per row. */
static void topk_rows(int64_t lo, int64_t hi, int64_t n, int64_t k, const float *x, Entry *heaps, float *vals, int32_t *idx) {
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * n;
    Entry *h = heaps + r * k;
    for (int64_t i = 0; i < k; i++) h[i] = (Entry){xr[i], (int32_t)i};
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int64_t i = k; i < n; i++) {
      Entry e = {xr[i], (int32_t)i};
      if (worse(h[0], e)) {
        h[0] = e;
        sift_down(h, k, 0);
      }
    }
    /* Pop the worst to the back: the array ends best-first. */
    for (int64_t end = k - 1; end > 0; end--) {
      Entry t = h[0];
      h[0] = h[end];
      h[end] = t;
      sift_down(h, end, 0);
    }
    for (int64_t j = 0; j < k; j++) {
      vals[r * k + j] = h[j].v;
      idx[r * k + j] = h[j].i;
    }
  }
}

static napi_value k_topk(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "topk", 6)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), n = arg_int(&c, 1, "n", 0), k = arg_int(&c, 3, "k", 0);
  if (!c.failed && k > n) fail(&c, true, "k = %lld is larger than n = %lld", (long long)k, (long long)n);
  if (!c.failed && n > INT32_MAX) fail(&c, true, "n must be < 2^31");
  const float *x = arg_f32(&c, 2, "x", (double)rows * n);
  float *vals = arg_f32(&c, 4, "vals", (double)rows * k);
  int32_t *idx = arg_i32(&c, 5, "idx", (double)rows * k);
  if (c.failed || k == 0 || rows == 0) return c.failed ? NULL : undefined(env);
  Entry *heaps = malloc((size_t)(rows * k) * sizeof(Entry));
  if (heaps == NULL) {
    napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.topk: out of memory");
    return NULL;
  }
  PARALLEL_RANGE((double)rows * n, rows, topk_rows, n, k, x, heaps, vals, idx);
  free(heaps);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * threads API and module init
 * ------------------------------------------------------------------------------------------- */

static napi_value k_set_num_threads(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "setNumThreads", 1)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 1);
  if (!c.failed && n > MAX_THREADS) fail(&c, true, "n = %lld is more threads than supported (%d)", (long long)n, MAX_THREADS);
  if (c.failed) return NULL;
  set_threads((int)n);
  return undefined(env);
}

static napi_value k_get_num_threads(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  napi_create_int32(env, threads(), &r);
  return r;
}

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  pthread_once(&g_init_once, init_process_once);
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
      {"setNumThreads", k_set_num_threads},
      {"getNumThreads", k_get_num_threads},
      {"gemm", k_gemm},
      {"binary", k_binary},
      {"unary", k_unary},
      {"unaryBackward", k_unary_backward},
      {"axpy", k_axpy},
      {"scale", k_scale},
      {"sumSquares", k_sum_squares},
      {"reduceSum", k_reduce_sum},
      {"softmax", k_softmax},
      {"softmaxBackward", k_softmax_backward},
      {"attention", k_attention},
      {"attentionBackward", k_attention_backward},
      {"copy2d", k_copy2d},
      {"logSoftmaxGather", k_log_softmax_gather},
      {"logSoftmaxGatherBackward", k_log_softmax_gather_backward},
      {"entropy", k_entropy},
      {"rmsnorm", k_rmsnorm},
      {"rmsnormBackward", k_rmsnorm_backward},
      {"layernorm", k_layernorm},
      {"layernormBackward", k_layernorm_backward},
      {"rope", k_rope},
      {"ropeBackward", k_rope_backward},
      {"swiglu", k_swiglu},
      {"swigluBackward", k_swiglu_backward},
      {"embedding", k_embedding},
      {"embeddingBackward", k_embedding_backward},
      {"adamw", k_adamw},
      {"topk", k_topk},
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != napi_ok ||
        napi_set_named_property(env, exports, fns[i].name, f) != napi_ok)
      return NULL;
  }
  return exports;
}
