/*
 * Process set-up at load, once per process (worker threads load the addon again but share its
 * state): the kernel table for this CPU, the BLAS (blas.c), the thread count, malloc tuning.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * ISA: one table per variant built here; `kern` points at the one in use.
 * ------------------------------------------------------------------------------------------- */

const char *const ISA_NAMES[ISA_COUNT] = {"generic", "avx2", "avx512"};

#define ENTRY_generic(name, Args) .name = name##__generic,
#define ENTRY_avx2(name, Args) .name = name##__avx2,
#define ENTRY_avx512(name, Args) .name = name##__avx512,

static const Kernels TABLES[ISA_COUNT] = {
    [ISA_GENERIC] = {.isa = ISA_GENERIC, .sgemm = sgemm_builtin__generic, .sgemm_prepacked = sgemm_prepacked__generic, .sgemm_packed_floats = sgemm_packed_floats__generic, .sgemm_pack = sgemm_pack__generic, ALL_LOOPS(ENTRY_generic)},
#if MAGRPO_X86
    [ISA_AVX2] = {.isa = ISA_AVX2, .sgemm = sgemm_builtin__avx2, .sgemm_prepacked = sgemm_prepacked__avx2, .sgemm_packed_floats = sgemm_packed_floats__avx2, .sgemm_pack = sgemm_pack__avx2, ALL_LOOPS(ENTRY_avx2)},
    [ISA_AVX512] = {.isa = ISA_AVX512, .sgemm = sgemm_builtin__avx512, .sgemm_prepacked = sgemm_prepacked__avx512, .sgemm_packed_floats = sgemm_packed_floats__avx512, .sgemm_pack = sgemm_pack__avx512, ALL_LOOPS(ENTRY_avx512)},
#endif
};

const Kernels *kern = &TABLES[ISA_GENERIC];

/* The best variant this CPU (and its OS, which must save the wider registers) runs. */
static Isa best_isa(void) {
#if MAGRPO_X86
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) return ISA_AVX512;
  if (avx2) return ISA_AVX2;
#endif
  return ISA_GENERIC;
}

/* Each variant needs the features of those before it. */
bool isa_supported(Isa isa) { return isa <= best_isa(); }

static char g_isa_error[256];

/* MAGRPO_ISA if set (it must name a variant this CPU runs), else the best one. */
static void select_isa(void) {
  Isa best = best_isa();
  const char *want = getenv("MAGRPO_ISA");
  if (want == NULL || *want == '\0' || strcmp(want, "auto") == 0) {
    kern = &TABLES[best];
    return;
  }
  for (int i = 0; i < ISA_COUNT; i++) {
    if (strcmp(want, ISA_NAMES[i]) != 0) continue;
    if (i > (int)best) {
      static const char *const needs[ISA_COUNT] = {"", "AVX2 and FMA", "AVX-512 F, BW and VL"};
      snprintf(g_isa_error, sizeof g_isa_error, "MAGRPO_ISA=%s: this CPU cannot run it (%s); the best variant here is %s", want,
               MAGRPO_X86 ? needs[i] : "not an x86-64 CPU", ISA_NAMES[best]);
      return;
    }
    kern = &TABLES[i];
    return;
  }
  snprintf(g_isa_error, sizeof g_isa_error, "MAGRPO_ISA=%.40s is not one of generic, avx2, avx512, auto", want);
}

/* ---------------------------------------------------------------------------------------------
 * Threads and memory
 * ------------------------------------------------------------------------------------------- */

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

static const char *g_blas_error, *g_bf16_error;

static void init_process_once(void) {
  select_isa();
  g_bf16_error = bf16_kernel_init();
  g_blas_error = blas_init();
  tune_malloc();
  int n = env_threads("MAGRPO_NUM_THREADS");
  if (n == 0) n = env_threads("OPENBLAS_NUM_THREADS");
  if (n == 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    n = cores > 0 ? (int)cores : 1;
  }
  set_threads(n);
}

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

const char *magrpo_init(void) {
  pthread_once(&g_init_once, init_process_once);
  return g_isa_error[0] ? g_isa_error : g_bf16_error != NULL ? g_bf16_error : g_blas_error;
}
