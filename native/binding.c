/*
 * N-API bindings: the `Backend` interface of src/engine/backend.ts as JS functions over the
 * launchers of the other files, and the ISA in use.
 *
 * Every argument is checked before any loop runs: wrong types and too-short buffers throw a
 * TypeError naming the argument, bad sizes or indices a RangeError, so no kernel reads or writes
 * out of bounds.
 */
#include <node_api.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * Argument parsing. A `Call` collects arguments; the first failure throws and marks the call
 * failed, later getters become no-ops, and the kernel checks `c.failed` once before working.
 * ------------------------------------------------------------------------------------------- */

#define MAX_ARGS 32

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

/* An optional trailing boolean: false when absent or undefined. */
static bool arg_bool_opt(Call *c, size_t i, const char *name) {
  if (c->failed) return false;
  napi_valuetype t;
  if (napi_typeof(c->env, c->argv[i], &t) != napi_ok || t == napi_undefined) return false;
  return arg_bool(c, i, name);
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


/* A buffer argument that may be null or undefined (not given, or a gradient not wanted). */
static bool arg_is_null(Call *c, size_t i) {
  napi_valuetype t;
  napi_typeof(c->env, c->argv[i], &t);
  return t == napi_null || t == napi_undefined;
}

static float *arg_f32_or_null(Call *c, size_t i, const char *name, double need) {
  if (c->failed) return NULL;
  return arg_is_null(c, i) ? NULL : arg_f32(c, i, name, need);
}

/* ---------------------------------------------------------------------------------------------
 * gemm
 * ------------------------------------------------------------------------------------------- */

/* One gemm's 16 arguments from position `at` (transA, transB, M, N, K, alpha, A, offA, lda, B, offB,
 * ldb, beta, C, offC, ldc), checked; false (with the error thrown) when they are not valid. */
static bool gemm_args(Call *c, int at, GemmPairCall *g) {
  bool tA = arg_bool(c, at + 0, "transA"), tB = arg_bool(c, at + 1, "transB");
  int64_t M = arg_int(c, at + 2, "M", 0), N = arg_int(c, at + 3, "N", 0), K = arg_int(c, at + 4, "K", 0);
  double alpha = arg_number(c, at + 5, "alpha");
  int64_t offA = arg_int(c, at + 7, "offA", 0), lda = arg_int(c, at + 8, "lda", 0);
  int64_t offB = arg_int(c, at + 10, "offB", 0), ldb = arg_int(c, at + 11, "ldb", 0);
  double beta = arg_number(c, at + 12, "beta");
  int64_t offC = arg_int(c, at + 14, "offC", 0), ldc = arg_int(c, at + 15, "ldc", 0);
  if (c->failed) return false;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX) {
    fail(c, true, "sizes and leading dimensions must be < 2^31");
    return false;
  }
  /* A is stored [rowsA, colsA] with row stride lda; likewise B and C. */
  int64_t rowsA = tA ? K : M, colsA = tA ? M : K;
  int64_t rowsB = tB ? N : K, colsB = tB ? K : N;
  int64_t minA = colsA > 1 ? colsA : 1, minB = colsB > 1 ? colsB : 1, minC = N > 1 ? N : 1;
  if (lda < minA) fail(c, true, "lda = %lld is less than %lld, the row length of A as stored", (long long)lda, (long long)minA);
  if (ldb < minB) fail(c, true, "ldb = %lld is less than %lld, the row length of B as stored", (long long)ldb, (long long)minB);
  if (ldc < minC) fail(c, true, "ldc = %lld is less than N = %lld", (long long)ldc, (long long)minC);
  bool emptyA = rowsA == 0 || colsA == 0, emptyB = rowsB == 0 || colsB == 0, emptyC = M == 0 || N == 0;
  float *A = arg_f32(c, at + 6, "A", emptyA ? 0 : (double)offA + (double)(rowsA - 1) * lda + colsA);
  float *B = arg_f32(c, at + 9, "B", emptyB ? 0 : (double)offB + (double)(rowsB - 1) * ldb + colsB);
  float *C = arg_f32(c, at + 13, "C", emptyC ? 0 : (double)offC + (double)(M - 1) * ldc + N);
  if (c->failed) return false;
  *g = (GemmPairCall){tA, tB, M, N, K, lda, ldb, ldc, alpha, beta, A ? A + offA : NULL, B ? B + offB : NULL, C ? C + offC : NULL};
  return true;
}

static napi_value k_gemm(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "gemm", 16)) return NULL;
  GemmPairCall g;
  if (!gemm_args(&c, 0, &g)) return NULL;
  gemm_f32(g.tA, g.tB, g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc); /* returns at once when C is empty */
  return undefined(env);
}

/* Two independent products: the first gemm's 16 arguments, then the second's (gemm_pair). */
static napi_value k_gemm_pair(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "gemmPair", 32)) return NULL;
  GemmPairCall g[2];
  if (!gemm_args(&c, 0, &g[0]) || !gemm_args(&c, 16, &g[1])) return NULL;
  gemm_pair(&g[0], &g[1]);
  return undefined(env);
}

/* Pre-packed weights for decoding (sgemm.c): the packed buffer's size, the packing, the product.
 * A trailing `bf16` (optional) asks for bf16 panels: half the bytes, for precision bf16. */
static napi_value k_packed_floats(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "packedFloats", 2)) return NULL;
  int64_t N = arg_int(&c, 0, "N", 0), K = arg_int(&c, 1, "K", 0);
  bool bf16 = arg_bool_opt(&c, 2, "bf16");
  if (c.failed) return NULL;
  napi_value out;
  napi_create_double(env, (double)sgemm_packed_floats(N, K, bf16), &out);
  return out;
}

static napi_value k_pack_b(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "packB", 7)) return NULL;
  bool tB = arg_bool(&c, 0, "transB");
  int64_t N = arg_int(&c, 1, "N", 1), K = arg_int(&c, 2, "K", 1);
  int64_t offB = arg_int(&c, 4, "offB", 0), ldb = arg_int(&c, 5, "ldb", 0);
  bool bf16 = arg_bool_opt(&c, 7, "bf16");
  if (c.failed) return NULL;
  if (N > INT32_MAX || K > INT32_MAX || ldb > INT32_MAX) {
    fail(&c, true, "sizes and leading dimensions must be < 2^31");
    return NULL;
  }
  int64_t rowsB = tB ? N : K, colsB = tB ? K : N;
  if (ldb < colsB) fail(&c, true, "ldb = %lld is less than %lld, the row length of B as stored", (long long)ldb, (long long)colsB);
  float *B = arg_f32(&c, 3, "B", (double)offB + (double)(rowsB - 1) * ldb + colsB);
  float *dst = arg_f32(&c, 6, "packed", (double)sgemm_packed_floats(N, K, bf16));
  if (c.failed) return NULL;
  sgemm_pack_b(tB, N, K, B + offB, ldb, dst, bf16);
  return undefined(env);
}

static napi_value k_gemm_prepacked(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "gemmPrepacked", 12)) return NULL;
  int64_t M = arg_int(&c, 0, "M", 0), N = arg_int(&c, 1, "N", 1), K = arg_int(&c, 2, "K", 1);
  double alpha = arg_number(&c, 3, "alpha");
  int64_t offA = arg_int(&c, 5, "offA", 0), lda = arg_int(&c, 6, "lda", 0);
  double beta = arg_number(&c, 8, "beta");
  int64_t offC = arg_int(&c, 10, "offC", 0), ldc = arg_int(&c, 11, "ldc", 0);
  bool bf16 = arg_bool_opt(&c, 12, "bf16");
  if (c.failed) return NULL;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldc > INT32_MAX) {
    fail(&c, true, "sizes and leading dimensions must be < 2^31");
    return NULL;
  }
  if (lda < K) fail(&c, true, "lda = %lld is less than K = %lld", (long long)lda, (long long)K);
  if (ldc < N) fail(&c, true, "ldc = %lld is less than N = %lld", (long long)ldc, (long long)N);
  float *A = arg_f32(&c, 4, "A", M == 0 ? 0 : (double)offA + (double)(M - 1) * lda + K);
  float *packed = arg_f32(&c, 7, "packed", (double)sgemm_packed_floats(N, K, bf16));
  if (packed && !c.failed && !sgemm_pack_matches(packed, bf16)) fail(&c, true, "packed: not a pack made by packB with bf16 = %s", bf16 ? "true" : "false");
  float *C = arg_f32(&c, 9, "C", M == 0 ? 0 : (double)offC + (double)(M - 1) * ldc + N);
  if (c.failed || M == 0) return c.failed ? NULL : undefined(env);
  sgemm_prepacked(M, N, K, (float)alpha, A + offA, lda, packed, bf16, (float)beta, C + offC, ldc);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * elementwise
 * ------------------------------------------------------------------------------------------- */

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
  if (c.failed) return NULL;
  binary_forward(op, rank, shape, a, as, b, bs, out);
  return undefined(env);
}

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

static napi_value k_unary(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "unary", 4)) return NULL;
  int op = unary_op(&c, 0);
  int64_t n = arg_int(&c, 1, "n", 0);
  const float *x = arg_f32(&c, 2, "x", (double)n);
  float *out = arg_f32(&c, 3, "out", (double)n);
  if (c.failed) return NULL;
  unary_forward(op, n, x, out);
  return undefined(env);
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
  unary_backward(op, n, x, gy, gx);
  return undefined(env);
}

static napi_value k_axpy(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "axpy", 4)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  double alpha = arg_number(&c, 1, "alpha");
  const float *x = arg_f32(&c, 2, "x", (double)n);
  float *y = arg_f32(&c, 3, "y", (double)n);
  if (c.failed) return NULL;
  axpy_f32(n, alpha, x, y);
  return undefined(env);
}

static napi_value k_scale(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "scale", 3)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  double alpha = arg_number(&c, 1, "alpha");
  float *x = arg_f32(&c, 2, "x", (double)n);
  if (c.failed) return NULL;
  scale_f32(n, alpha, x);
  return undefined(env);
}

static napi_value k_sum_squares(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "sumSquares", 2)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *x = arg_f32(&c, 1, "x", (double)n);
  if (c.failed) return NULL;
  napi_value r;
  napi_create_double(env, sum_squares(n, x), &r);
  return r;
}

static napi_value k_reduce_sum(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "reduceSum", 6)) return NULL;
  int64_t outer = arg_int(&c, 0, "outer", 0), len = arg_int(&c, 1, "len", 0), inner = arg_int(&c, 2, "inner", 0);
  const float *x = arg_f32(&c, 3, "x", (double)outer * len * inner);
  float *out = arg_f32(&c, 4, "out", (double)outer * inner);
  bool acc = arg_bool(&c, 5, "accumulate");
  if (c.failed) return NULL;
  reduce_sum(outer, len, inner, x, out, acc);
  return undefined(env);
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
  copy2d(rows, cols, src + srcOff, lds, dst + dstOff, ldd, acc);
  return undefined(env);
}

static napi_value k_swiglu(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "swiglu", 4)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *g = arg_f32(&c, 1, "gate", (double)n);
  const float *u = arg_f32(&c, 2, "up", (double)n);
  float *out = arg_f32(&c, 3, "out", (double)n);
  if (c.failed) return NULL;
  swiglu_forward(n, g, u, out);
  return undefined(env);
}

static napi_value k_swiglu_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "swigluBackward", 7)) return NULL;
  int64_t n = arg_int(&c, 0, "n", 0);
  const float *g = arg_f32(&c, 1, "gate", (double)n);
  const float *u = arg_f32(&c, 2, "up", (double)n);
  const float *gy = arg_f32(&c, 3, "gy", (double)n);
  float *gg = arg_f32(&c, 4, "gGate", (double)n);
  float *gu = arg_f32(&c, 5, "gUp", (double)n);
  bool acc = arg_bool(&c, 6, "accumulate");
  if (c.failed) return NULL;
  swiglu_backward(n, g, u, gy, gg, gu, acc);
  return undefined(env);
}

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
  embedding_forward(n, C, ids, W, out);
  return undefined(env);
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
  embedding_backward(n, C, ids, gy, gW);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * attention family: softmax, attention, rope
 * ------------------------------------------------------------------------------------------- */

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
  if (!c.failed && !arg_is_null(&c, 9)) {
    const uint8_t *km = arg_typed(&c, 9, "keyMask", napi_uint8_array, cols == 0 ? 0 : (double)kmOff + cols, NULL);
    if (km) sp.km = km + kmOff;
  }
  if (c.failed || n == 0) return c.failed ? NULL : undefined(env);
  softmax_forward(rows, &sp, x + xOff, out + outOff);
  return undefined(env);
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
  softmax_backward(rows, cols, scale, y + yOff, gy + gyOff, gx + gxOff);
  return undefined(env);
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
  if (!c.failed && !arg_is_null(&c, 12)) a.km = arg_typed(&c, 12, "keyMask", napi_uint8_array, (double)a.B * a.Smax, NULL);
  a.causal = arg_bool(&c, 13, "causal");
  a.pastLen = arg_int(&c, 14, "pastLen", -9007199254740992.0);
  a.scale = (float)arg_number(&c, 15, "scale");
  if (c.failed) return NULL;
  attention_forward(&a, P, out);
  return undefined(env);
}

static napi_value k_attention_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "attentionBackward", 18)) return NULL;
  AttnGrads gr = {0};
  float *P;
  AttnSpec a = attn_args(&c, &P);
  gr.P = P;
  double nq = (double)a.B * a.T * a.H * a.D, nk = (double)a.B * a.Smax * a.Hkv * a.D;
  gr.gO = arg_f32(&c, 11, "gOut", nq);
  a.causal = arg_bool(&c, 12, "causal");
  a.pastLen = arg_int(&c, 13, "pastLen", -9007199254740992.0);
  a.scale = (float)arg_number(&c, 14, "scale");
  gr.gq = arg_f32_or_null(&c, 15, "gq", nq);
  gr.gk = arg_f32_or_null(&c, 16, "gk", nk);
  gr.gv = arg_f32_or_null(&c, 17, "gv", nk);
  if (c.failed) return NULL;
  if (!attention_backward(&a, &gr)) {
    napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.attentionBackward: out of memory");
    return NULL;
  }
  return undefined(env);
}

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

static napi_value k_rope(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "rope", 8)) return NULL;
  int64_t rows;
  RopeSpec sp = rope_args(&c, &rows);
  double n = (double)rows * sp.H * sp.D;
  const float *x = arg_f32(&c, 3, "x", n);
  float *out = arg_f32(&c, 7, "out", n);
  if (c.failed) return NULL;
  rope_forward(rows, &sp, x, out);
  return undefined(env);
}

static napi_value k_rope_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "ropeBackward", 9)) return NULL;
  int64_t rows;
  RopeSpec sp = rope_args(&c, &rows);
  double n = (double)rows * sp.H * sp.D;
  const float *gy = arg_f32(&c, 3, "gy", n);
  float *gx = arg_f32(&c, 7, "gx", n);
  bool acc = arg_bool(&c, 8, "accumulate");
  if (c.failed) return NULL;
  rope_backward(rows, &sp, gy, gx, acc);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * norms
 * ------------------------------------------------------------------------------------------- */

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
  rmsnorm_forward(rows, C, x, w, eps, out, rstd);
  return undefined(env);
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
  rmsnorm_backward(rows, C, x, w, rstd, gy, gx, gw);
  return undefined(env);
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
  layernorm_forward(rows, C, x, w, b, eps, out, mean, rstd);
  return undefined(env);
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
  layernorm_backward(rows, C, x, w, mean, rstd, gy, gx, gw, gb);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * optimiser
 * ------------------------------------------------------------------------------------------- */

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
  adamw_update(n, &h, p, g, m, v);
  return undefined(env);
}

/* ---------------------------------------------------------------------------------------------
 * sampling: logSoftmaxGather, its backward, entropy, topk
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
  log_softmax_gather_forward(rows, V, logits, targets, logp, lse);
  return undefined(env);
}

static napi_value k_log_softmax_gather_backward(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "logSoftmaxGatherBackward", 8)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), V = arg_int(&c, 1, "V", 0);
  const float *logits = arg_f32(&c, 2, "logits", (double)rows * V);
  const float *lse = arg_f32(&c, 3, "lse", (double)rows);
  const int32_t *targets = arg_i32(&c, 4, "targets", (double)rows);
  const float *gLogp = arg_f32(&c, 5, "gLogp", (double)rows);
  float *gLogits = arg_f32(&c, 6, "gLogits", (double)rows * V);
  bool accumulate = arg_bool(&c, 7, "accumulate");
  check_targets(&c, targets, rows, V);
  if (c.failed) return NULL;
  log_softmax_gather_backward(rows, V, logits, lse, targets, gLogp, gLogits, accumulate);
  return undefined(env);
}

static napi_value k_entropy(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "entropy", 5)) return NULL;
  int64_t rows = arg_int(&c, 0, "rows", 0), V = arg_int(&c, 1, "V", 0);
  const float *logits = arg_f32(&c, 2, "logits", (double)rows * V);
  const float *lse = arg_f32(&c, 3, "lse", (double)rows);
  float *out = arg_f32(&c, 4, "out", (double)rows);
  if (c.failed) return NULL;
  entropy_forward(rows, V, logits, lse, out);
  return undefined(env);
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
  if (c.failed) return NULL;
  if (!topk_rows(rows, n, k, x, vals, idx)) {
    napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.topk: out of memory");
    return NULL;
  }
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

/* The name of the kernel variant in use: "generic", "avx2" or "avx512". */
static napi_value k_isa(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  napi_create_string_utf8(env, ISA_NAMES[kern->isa], NAPI_AUTO_LENGTH, &r);
  return r;
}

/* The variants this CPU runs, in order of preference (the last is the default). */
static napi_value k_supported_isas(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value arr, s;
  napi_create_array(env, &arr);
  uint32_t n = 0;
  for (int i = 0; i < ISA_COUNT; i++) {
    if (!isa_supported((Isa)i)) continue;
    napi_create_string_utf8(env, ISA_NAMES[i], NAPI_AUTO_LENGTH, &s);
    napi_set_element(env, arr, n++, s);
  }
  return arr;
}

/* One thread's FP32 peak in GFLOP/s (FMA loop in the widest vectors this CPU runs), for `seconds`. */
static napi_value k_fma_peak(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "fmaPeak", 1)) return NULL;
  int64_t ms = arg_int(&c, 0, "milliseconds", 1);
  if (c.failed) return NULL;
  Isa best = ISA_GENERIC;
  for (int i = 0; i < ISA_COUNT; i++)
    if (isa_supported((Isa)i)) best = (Isa)i;
  napi_value r;
  napi_create_double(env, fma_peak_gflops(best, (double)ms / 1000.0), &r);
  return r;
}

/* setPrecision("fp32" | "bf16" | "bf16-emulated"). */
static napi_value k_set_precision(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "setPrecision", 1)) return NULL;
  char mode[32] = "";
  size_t len = 0;
  if (napi_get_value_string_utf8(env, c.argv[0], mode, sizeof mode, &len) != napi_ok) {
    napi_throw_type_error(env, "NATIVE_BAD_ARG", "setPrecision: mode must be a string");
    return NULL;
  }
  if (strcmp(mode, "fp32") == 0)
    set_precision_bf16(false, false);
  else if (strcmp(mode, "bf16") == 0)
    set_precision_bf16(true, false);
  else if (strcmp(mode, "bf16-emulated") == 0)
    set_precision_bf16(true, true);
  else {
    napi_throw_range_error(env, "NATIVE_BAD_ARG", "setPrecision: mode must be fp32, bf16 or bf16-emulated");
    return NULL;
  }
  return undefined(env);
}

/* { bf16: on, native: VDPBF16PS in use (else emulated), cpu: the CPU has AVX-512 BF16 }. */
static napi_value k_precision(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r, v;
  napi_create_object(env, &r);
  napi_get_boolean(env, precision_bf16(), &v);
  napi_set_named_property(env, r, "bf16", v);
  napi_get_boolean(env, bf16_native(), &v);
  napi_set_named_property(env, r, "native", v);
  napi_get_boolean(env, cpu_has_avx512bf16(), &v);
  napi_set_named_property(env, r, "cpu", v);
  return r;
}

/* The kernel bf16 products run on now: "amx", "avx512bf16" or "emulated" (MAGRPO_BF16_KERNEL). */
static napi_value k_bf16_kernel(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  napi_create_string_utf8(env, BF16_KERNEL_NAMES[bf16_kernel()], NAPI_AUTO_LENGTH, &r);
  return r;
}

static void set_string(napi_env env, napi_value obj, const char *key, const char *value) {
  napi_value v;
  napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, key, v);
}

/* The BLAS in use: { kind: "openblas" | "builtin", path, corename, config, reason }. */
static napi_value k_blas(napi_env env, napi_callback_info info) {
  (void)info;
  const BlasInfo *b = blas_info();
  napi_value r;
  napi_create_object(env, &r);
  set_string(env, r, "kind", b->openblas ? "openblas" : "builtin");
  set_string(env, r, "path", b->path);
  set_string(env, r, "corename", b->corename);
  set_string(env, r, "config", b->config);
  set_string(env, r, "reason", b->why);
  return r;
}

/* OpenBLAS's core name, or null with the builtin sgemm (read by the core probe's child). */
static napi_value k_blas_core_name(napi_env env, napi_callback_info info) {
  (void)info;
  const BlasInfo *b = blas_info();
  napi_value r;
  if (b->openblas && b->corename[0])
    napi_create_string_utf8(env, b->corename, NAPI_AUTO_LENGTH, &r);
  else
    napi_get_null(env, &r);
  return r;
}

/* ---------------------------------------------------------------------------------------------
 * decode
 * ------------------------------------------------------------------------------------------- */

/* Element j of the Array argument i as a Float32Array of at least `need` floats; NULL for a null
 * or undefined element when `optional`. */
static float *elem_f32(Call *c, size_t i, uint32_t j, const char *what, double need, bool optional) {
  if (c->failed) return NULL;
  napi_value v;
  if (napi_get_element(c->env, c->argv[i], j, &v) != napi_ok) {
    fail(c, false, "could not read element %u of its argument %zu", j, i);
    return NULL;
  }
  napi_valuetype t;
  napi_typeof(c->env, v, &t);
  if (optional && (t == napi_null || t == napi_undefined)) return NULL;
  napi_typedarray_type type;
  size_t len;
  void *data;
  if (napi_get_typedarray_info(c->env, v, &type, &len, &data, NULL, NULL) != napi_ok || type != napi_float32_array) {
    fail(c, false, "%s (element %u) must be a Float32Array%s", what, j, optional ? " or null" : "");
    return NULL;
  }
  if ((double)len < need) fail(c, false, "%s (element %u) has %zu elements, needs at least %.0f", what, j, len, need);
  return data;
}

/* Element j of argument i: a pack of op(B) [K, N] made by packB with this precision. */
static float *elem_pack(Call *c, size_t i, uint32_t j, const char *what, int64_t N, int64_t K, bool bf16) {
  float *p = elem_f32(c, i, j, what, (double)sgemm_packed_floats(N, K, bf16), false);
  if (p && !c->failed && !sgemm_pack_matches(p, bf16)) fail(c, false, "%s (element %u) is not a pack made by packB with bf16 = %s", what, j, bf16 ? "true" : "false");
  return p;
}

#define DECODE_PER_LAYER 16

/* llamaDecodeStep(dims, weights, caches, keyMask, ids, positions, cos, sin, logits[, loraRuns, loraWeights[, kvRows, kvShared]]): model/llama-decode.ts. */
static napi_value k_llama_decode_step(napi_env env, napi_callback_info info) {
  Call c;
  if (!call_init(&c, env, info, "llamaDecodeStep", 9)) return NULL;
  const double *dims = arg_typed(&c, 0, "dims", napi_float64_array, 12, NULL);
  if (c.failed) return NULL;
  for (int i = 0; i < 10; i++)
    if (!(dims[i] >= 0 && dims[i] <= INT32_MAX) || dims[i] != floor(dims[i])) {
      fail(&c, true, "dims[%d] = %g must be an integer in [0, 2^31)", i, dims[i]);
      return NULL;
    }
  LlamaDecode d = {.R = (int64_t)dims[0], .L = (int64_t)dims[1], .C = (int64_t)dims[2], .H = (int64_t)dims[3], .Hkv = (int64_t)dims[4],
                   .D = (int64_t)dims[5], .F = (int64_t)dims[6], .V = (int64_t)dims[7], .Smax = (int64_t)dims[8], .len = (int64_t)dims[9],
                   .eps = dims[10], .bf16 = dims[11] != 0};
  if (d.R == 0 || d.C == 0 || d.H == 0 || d.Hkv == 0 || d.D == 0 || d.F == 0 || d.V == 0) fail(&c, true, "every size must be > 0");
  else if (d.H % d.Hkv) fail(&c, true, "H = %lld is not a multiple of Hkv = %lld", (long long)d.H, (long long)d.Hkv);
  else if (d.D % 2) fail(&c, true, "D = %lld must be even", (long long)d.D);
  else if (d.len + 1 > d.Smax) fail(&c, true, "the cache is full: len %lld + 1 > Smax %lld", (long long)d.len, (long long)d.Smax);
  if (c.failed) return NULL;
  uint32_t nw = 0, nc = 0;
  napi_get_array_length(env, c.argv[1], &nw);
  napi_get_array_length(env, c.argv[2], &nc);
  if (nw != 3 + DECODE_PER_LAYER * d.L) fail(&c, false, "weights must be an Array of %lld entries, got %u", (long long)(3 + DECODE_PER_LAYER * d.L), nw);
  if (nc != 2 * d.L) fail(&c, false, "caches must be an Array of %lld entries, got %u", (long long)(2 * d.L), nc);
  if (c.failed) return NULL;
  int64_t C = d.C, HD = d.H * d.D, KV = d.Hkv * d.D, F = d.F;
  d.embed = elem_f32(&c, 1, 0, "embed", (double)d.V * C, false);
  d.lnf = elem_f32(&c, 1, 1, "final norm", (double)C, false);
  d.head = elem_pack(&c, 1, 2, "head pack", d.V, C, d.bf16);
  LlamaDecodeLayer *layers = calloc((size_t)d.L, sizeof *layers);
  float **kv = calloc((size_t)(2 * d.L), sizeof *kv); /* the L key caches, then the L value caches */
  if (!layers || !kv) {
    free(layers);
    free(kv);
    napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.llamaDecodeStep: out of memory");
    return NULL;
  }
  for (int64_t l = 0; l < d.L && !c.failed; l++) {
    uint32_t b = (uint32_t)(3 + DECODE_PER_LAYER * l);
    LlamaDecodeLayer *w = &layers[l];
    w->ln1 = elem_f32(&c, 1, b + 0, "input norm", C, false);
    w->q = elem_pack(&c, 1, b + 1, "q_proj pack", HD, C, d.bf16);
    w->k = elem_pack(&c, 1, b + 2, "k_proj pack", KV, C, d.bf16);
    w->v = elem_pack(&c, 1, b + 3, "v_proj pack", KV, C, d.bf16);
    w->o = elem_pack(&c, 1, b + 4, "o_proj pack", C, HD, d.bf16);
    w->ln2 = elem_f32(&c, 1, b + 5, "post-attention norm", C, false);
    w->gate = elem_pack(&c, 1, b + 6, "gate_proj pack", F, C, d.bf16);
    w->up = elem_pack(&c, 1, b + 7, "up_proj pack", F, C, d.bf16);
    w->down = elem_pack(&c, 1, b + 8, "down_proj pack", C, F, d.bf16);
    w->bq = elem_f32(&c, 1, b + 9, "q_proj bias", HD, true);
    w->bk = elem_f32(&c, 1, b + 10, "k_proj bias", KV, true);
    w->bv = elem_f32(&c, 1, b + 11, "v_proj bias", KV, true);
    w->bo = elem_f32(&c, 1, b + 12, "o_proj bias", C, true);
    w->bgate = elem_f32(&c, 1, b + 13, "gate_proj bias", F, true);
    w->bup = elem_f32(&c, 1, b + 14, "up_proj bias", F, true);
    w->bdown = elem_f32(&c, 1, b + 15, "down_proj bias", C, true);
    kv[l] = elem_f32(&c, 2, (uint32_t)(2 * l), "key cache", (double)d.R * d.Smax * KV, false);
    kv[d.L + l] = elem_f32(&c, 2, (uint32_t)(2 * l + 1), "value cache", (double)d.R * d.Smax * KV, false);
  }
  d.layers = layers;
  d.cacheK = kv;
  d.cacheV = kv + d.L;
  d.keyMask = arg_typed(&c, 3, "keyMask", napi_uint8_array, (double)d.R * d.Smax, NULL);
  d.ids = arg_i32(&c, 4, "ids", (double)d.R);
  d.pos = arg_i32(&c, 5, "positions", (double)d.R);
  size_t ncos = 0, nsin = 0;
  d.cos = arg_f32_table(&c, 6, "cos", &ncos);
  d.sin = arg_f32_table(&c, 7, "sin", &nsin);
  float *logits = arg_f32(&c, 8, "logits", (double)d.R * d.V);
  if (!c.failed) {
    size_t maxPos = (ncos < nsin ? ncos : nsin) / (size_t)(d.D / 2);
    for (int64_t r = 0; r < d.R && !c.failed; r++) {
      if (d.ids[r] < 0 || d.ids[r] >= d.V) fail(&c, true, "ids[%lld] = %d is outside the vocabulary of %lld", (long long)r, d.ids[r], (long long)d.V);
      else if (d.pos[r] < 0 || (size_t)d.pos[r] >= maxPos)
        fail(&c, true, "positions[%lld] = %d is outside the cos/sin tables of %zu positions", (long long)r, d.pos[r], maxPos);
    }
  }
  /* Optional: LoRA runs [row0, row1, r, scale] × n (Float64Array) and their weights (Array of
   * n · L · DECODE_LORA_PROJ · 2 Float32Array or null: A [r, in] then B [out, r]). */
  LlamaDecodeLora *runs = NULL;
  const float **ab = NULL;
  napi_valuetype t9 = napi_undefined;
  if (!c.failed) napi_typeof(env, c.argv[9], &t9);
  if (!c.failed && t9 != napi_undefined && t9 != napi_null) {
    size_t nr = 0;
    const double *spec = arg_typed(&c, 9, "loraRuns", napi_float64_array, 0, &nr);
    int64_t n = (int64_t)(nr / 4);
    uint32_t nab = 0;
    if (!c.failed && nr % 4) fail(&c, false, "loraRuns must hold 4 numbers per run (row0, row1, r, scale), got %zu", nr);
    if (!c.failed) napi_get_array_length(env, c.argv[10], &nab);
    if (!c.failed && nab != (uint32_t)(n * d.L * DECODE_LORA_PROJ * 2))
      fail(&c, false, "loraWeights must be an Array of %lld entries, got %u", (long long)(n * d.L * DECODE_LORA_PROJ * 2), nab);
    if (!c.failed && n > 0) {
      runs = calloc((size_t)n, sizeof *runs);
      ab = calloc((size_t)nab, sizeof *ab);
      if (!runs || !ab) fail(&c, false, "out of memory");
    }
    /* in and out of each projection, in DECODE_LORA_PROJ order */
    const int64_t ins[DECODE_LORA_PROJ] = {C, C, C, HD, C, C, F}, outs[DECODE_LORA_PROJ] = {HD, KV, KV, C, F, F, C};
    for (int64_t s = 0; s < n && !c.failed; s++) {
      const double *x = spec + 4 * s;
      if (!(x[0] >= 0 && x[0] < x[1] && x[1] <= (double)d.R && x[0] == floor(x[0]) && x[1] == floor(x[1])))
        fail(&c, true, "loraRuns run %lld: rows [%g, %g) are not inside [0, %lld)", (long long)s, x[0], x[1], (long long)d.R);
      else if (!(x[2] >= 1 && x[2] <= 4096 && x[2] == floor(x[2]))) fail(&c, true, "loraRuns run %lld: rank %g is not an integer in [1, 4096]", (long long)s, x[2]);
      if (c.failed) break;
      runs[s] = (LlamaDecodeLora){.row0 = (int64_t)x[0], .row1 = (int64_t)x[1], .r = (int64_t)x[2], .scale = (float)x[3], .ab = ab + s * d.L * DECODE_LORA_PROJ * 2};
      if (runs[s].r > d.maxRank) d.maxRank = runs[s].r;
      for (int64_t j = 0; j < d.L * DECODE_LORA_PROJ && !c.failed; j++) {
        int64_t p = j % DECODE_LORA_PROJ, r = runs[s].r;
        uint32_t at = (uint32_t)((s * d.L * DECODE_LORA_PROJ + j) * 2);
        ab[at] = elem_f32(&c, 10, at, "LoRA A", (double)(r * ins[p]), true);
        ab[at + 1] = elem_f32(&c, 10, at + 1, "LoRA B", (double)(outs[p] * r), true);
        if (!c.failed && (ab[at] == NULL) != (ab[at + 1] == NULL)) fail(&c, true, "LoRA entries %u and %u: A and B must both be given or both null", at, at + 1);
      }
    }
    d.nLora = c.failed ? 0 : n;
    d.lora = runs;
  }
  /* Optional: kvRows (Int32Array [R]) and kvShared (a count): row r reads its first kvShared cached
   * keys and values from row kvRows[r], whose copies of them are the same (AttnSpec). */
  napi_valuetype t11 = napi_undefined;
  if (!c.failed) napi_typeof(env, c.argv[11], &t11);
  if (!c.failed && t11 != napi_undefined && t11 != napi_null) {
    d.kvRow = arg_i32(&c, 11, "kvRows", (double)d.R);
    double shared = arg_number(&c, 12, "kvShared");
    if (!c.failed && !(shared >= 0 && shared <= (double)d.len && shared == floor(shared)))
      fail(&c, true, "kvShared = %g is not an integer in [0, len = %lld]", shared, (long long)d.len);
    for (int64_t r = 0; r < d.R && !c.failed; r++)
      if (d.kvRow[r] < 0 || d.kvRow[r] >= d.R) fail(&c, true, "kvRows[%lld] = %d is not a row of [0, %lld)", (long long)r, d.kvRow[r], (long long)d.R);
    d.kvShared = c.failed ? 0 : (int64_t)shared;
  }
  bool ok = !c.failed && llama_decode_step(&d, logits);
  bool oom = !c.failed && !ok;
  free(runs);
  free(ab);
  free(layers);
  free(kv);
  if (oom) napi_throw_error(env, "NATIVE_OUT_OF_MEMORY", "native.llamaDecodeStep: out of memory");
  return ok ? undefined(env) : NULL;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  const char *err = magrpo_init();
  if (err != NULL) {
    napi_throw_error(env, strncmp(err, "MAGRPO_BLAS", 11) == 0 ? "NATIVE_BAD_BLAS" : "NATIVE_BAD_ISA", err);
    return NULL;
  }
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
      {"setNumThreads", k_set_num_threads},
      {"getNumThreads", k_get_num_threads},
      {"isa", k_isa},
      {"supportedIsas", k_supported_isas},
      {"blas", k_blas},
      {"blasCoreName", k_blas_core_name},
      {"fmaPeak", k_fma_peak},
      {"setPrecision", k_set_precision},
      {"precision", k_precision},
      {"bf16Kernel", k_bf16_kernel},
      {"gemm", k_gemm},
      {"gemmPair", k_gemm_pair},
      {"packedFloats", k_packed_floats},
      {"packB", k_pack_b},
      {"gemmPrepacked", k_gemm_prepacked},
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
      {"llamaDecodeStep", k_llama_decode_step},
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != napi_ok ||
        napi_set_named_property(env, exports, fns[i].name, f) != napi_ok)
      return NULL;
  }
  return exports;
}
