// Function multi-versioning for the SOM CPU hot loops: the default build
// targets baseline x86-64 (SSE2), so loops marked TESSERA_SOM_CLONES also get
// AVX-512 and AVX2 clones, picked at load time by the CPU (GCC ifunc). The
// library is compiled with -O3 so these loops vectorise. Only additions,
// subtractions, conversions and IEEE divisions are used in them, so every
// clone rounds alike (no FMA contraction changes a result: the only
// multiply-add, norm - 2 acc, is exact in its product).
#ifndef TESSERA_KERNELS_SOM_CPU_CLONES_H_
#define TESSERA_KERNELS_SOM_CPU_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_SOM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_SOM_CLONES
#endif

#endif  // TESSERA_KERNELS_SOM_CPU_CLONES_H_
