# Built by scripts/build-native.mjs (node-gyp, at install time when no prebuilt addon loads).
# No BLAS and no OpenMP runtime are linked: an OpenBLAS is looked up with dlopen at load (blas.c),
# and threads are a pthreads pool (pool.c), so the addon needs only libc, libm and libdl.
{
  'targets': [
    {
      'target_name': 'magrpo',
      'sources': ['binding.c', 'dispatch.c', 'pool.c', 'blas.c', 'sgemm.c', 'gemm.c', 'elementwise.c', 'attention.c', 'norms.c', 'optim.c', 'sampling.c', 'peak.c', 'bf16gemm.c', 'amxgemm.c', 'decode.c'],
      'defines': ['NAPI_VERSION=8'],
      # No -m flags: AVX2 and AVX-512 code comes from per-function target attributes, chosen at load.
      # -fopenmp-simd honours the `omp simd` pragmas without the OpenMP runtime.
      'cflags_c': ['-std=gnu11', '-O3', '-fno-math-errno', '-fno-trapping-math', '-fopenmp-simd', '-fvisibility=hidden', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      # Named even where glibc >= 2.34 folds them into libc: the prebuilt addon also runs on older
      # glibc (magrpo.h binds the old symbol versions).
      'libraries': ['-Wl,--no-as-needed', '-ldl', '-lpthread', '-Wl,--as-needed'],
      'conditions': [['OS=="mac"', {'libraries!': ['-Wl,--no-as-needed', '-Wl,--as-needed']}]],
      'xcode_settings': {
        'GCC_OPTIMIZATION_LEVEL': '3',
        'OTHER_CFLAGS': ['-std=gnu11', '-fno-math-errno', '-fno-trapping-math', '-fopenmp-simd', '-fvisibility=hidden'],
      },
    },
  ],
}
