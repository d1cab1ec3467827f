# Built by scripts/build-native.mjs, which finds OpenBLAS (and libomp on macOS) and passes the
# variables below with -D; plain `node-gyp rebuild` works where OpenBLAS is on the default paths.
{
  'variables': {
    'openblas_include%': '',  # folder holding OpenBLAS's cblas.h
    'openblas_libdir%': '',   # folder holding libopenblas
    'openmp%': 1,
    'libomp_prefix%': '',     # macOS: Homebrew libomp, since Apple clang ships no OpenMP runtime
  },
  'targets': [
    {
      'target_name': 'magrpo',
      'sources': ['binding.c', 'dispatch.c', 'gemm.c', 'elementwise.c', 'attention.c', 'norms.c', 'optim.c', 'sampling.c'],
      'defines': ['NAPI_VERSION=8'],
      # No -m flags: AVX2 and AVX-512 code comes from per-function target attributes, chosen at load.
      'cflags_c': ['-std=gnu11', '-O3', '-fno-math-errno', '-fno-trapping-math', '-fvisibility=hidden', '-Wall', '-Wextra', '-Wno-unused-parameter'],
      'libraries': ['-lopenblas'],
      'xcode_settings': {
        'GCC_OPTIMIZATION_LEVEL': '3',
        'OTHER_CFLAGS': ['-std=gnu11', '-fno-math-errno', '-fno-trapping-math', '-fvisibility=hidden'],
      },
      'conditions': [
        ['openblas_include!=""', {'include_dirs': ['<(openblas_include)']}],
        ['openblas_libdir!=""', {
          'library_dirs': ['<(openblas_libdir)'],
          'ldflags': ['-Wl,-rpath,<(openblas_libdir)'],
          'xcode_settings': {'OTHER_LDFLAGS': ['-Wl,-rpath,<(openblas_libdir)']},
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
