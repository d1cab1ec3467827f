# Built by scripts/build-native.mjs, which finds OpenBLAS (and libomp on macOS) and passes the
# variables below with -D; plain `node-gyp rebuild` works where OpenBLAS is on the default paths.
{
  'variables': {
    'openblas_include%': '',  # folder holding OpenBLAS's cblas.h
    'openblas_libdir%': '',   # folder holding libopenblas
    'x86_simd%': 0,           # 1 when the build machine has AVX2 and FMA (the addon runs where it is built)
    'openmp%': 1,
    'libomp_prefix%': '',     # macOS: Homebrew libomp, since Apple clang ships no OpenMP runtime
  },
  'targets': [
    {
      'target_name': 'magrpo',
      'sources': ['binding.c', 'gemm.c', 'elementwise.c', 'attention.c', 'norms.c', 'optim.c', 'sampling.c'],
      'defines': ['NAPI_VERSION=8'],
      'cflags_c': ['-std=gnu11', '-O3', '-fno-math-errno', '-fno-trapping-math', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      'libraries': ['-lopenblas'],
      'xcode_settings': {
        'GCC_OPTIMIZATION_LEVEL': '3',
        'OTHER_CFLAGS': ['-std=gnu11', '-fno-math-errno', '-fno-trapping-math'],
      },
      'conditions': [
        ['openblas_include!=""', {'include_dirs': ['<(openblas_include)']}],
        ['openblas_libdir!=""', {
          'library_dirs': ['<(openblas_libdir)'],
          'ldflags': ['-Wl,-rpath,<(openblas_libdir)'],
          'xcode_settings': {'OTHER_LDFLAGS': ['-Wl,-rpath,<(openblas_libdir)']},
        }],
        ['x86_simd==1', {
          'cflags_c': ['-mavx2', '-mfma'],
          'xcode_settings': {'OTHER_CFLAGS': ['-mavx2', '-mfma']},
        }],
        ['openmp==1 and OS!="mac"', {'cflags_c': ['-fopenmp'], 'ldflags': ['-fopenmp']}],
        ['openmp==0', {
          'cflags_c': ['-Wno-unknown-pragmas'],
          'xcode_settings': {'OTHER_CFLAGS': ['-Wno-unknown-pragmas']},
        }],
        ['openmp==1 and OS=="mac"', {
          'xcode_settings': {
            'OTHER_CFLAGS': ['-Xpreprocessor', '-fopenmp', '-I<(libomp_prefix)/include'],
            'OTHER_LDFLAGS': ['-L<(libomp_prefix)/lib', '-lomp', '-Wl,-rpath,<(libomp_prefix)/lib'],
          },
        }],
      ],
    },
  ],
}
