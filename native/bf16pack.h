/*
 * The bf16 packing helpers shared by bf16gemm.c (VDPBF16PS) and amxgemm.c (AMX tiles): fp32 rounded
 * to bf16 (bf16_from_f32's rounding, in one VCVTNE2PS2BF16 per 32 floats) and pair words
 * (x[2k], x[2k+1]) put where each micro-kernel reads them. x86-64 only, AVX-512 BF16 code.
 */
#ifndef MAGRPO_BF16PACK_H
#define MAGRPO_BF16PACK_H

#include <immintrin.h>

#include "magrpo.h"

#define TARGET_bf16 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")))

/* bf16_from_f32 on 16 floats at once, the result in the low half of each 32-bit lane. */
TARGET_bf16 static inline __m512i round16(__m512 x) { return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)); }

/* 32 consecutive floats (n of them, the rest read as 0) as 16 pair words: word kk = (x[2kk], x[2kk+1]).
 * VCVTNE2PS2BF16 puts its second operand's 16 values in the low half: pairs as they lie in memory. */
TARGET_bf16 static inline __m512i pairs32(const float *x, int n) {
  __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1), m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + 16), _mm512_maskz_loadu_ps(m0, x));
}

/* Pair words of two rows side by side: word i = (x0[i], x1[i]), for 16 columns (n of them): both
 * rows rounded in one instruction (x0 in the low half), then their words interleaved. */
TARGET_bf16 static inline __m512i pairs_of_rows(const float *x0, const float *x1, __mmask16 m) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __m512i w = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, x1), _mm512_maskz_loadu_ps(m, x0));
  return _mm512_permutexvar_epi16(idx, w);
}

/* In-register transpose of a 16 × 16 block of 32-bit words: r[i][j] -> r[j][i]. */
TARGET_bf16 static inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* u[4q + c] holds, per 128-bit lane l, rows 4q..4q+3 of column 4l + c. */
  for (int c = 0; c < 4; c++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[c + 8] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    r[c + 4] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[c + 12] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

#endif
