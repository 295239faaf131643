// Function multi-versioning for the registration CPU hot loops: the default
// build targets baseline x86-64, so functions marked
// TESSERA_REGISTRATION_CLONES also get AVX-512 and AVX2 clones, picked at load
// time by the CPU (GCC ifunc). noinline: a clone must stay a call. Callers
// keep every clone's arithmetic element-wise in the same order (no FMA:
// -ffp-contract=off), so all clones give the same bits.
#ifndef TESSERA_KERNELS_REGISTRATION_CPU_CLONES_H_
#define TESSERA_KERNELS_REGISTRATION_CPU_CLONES_H_

#if defined(__x86_64__)
#define TESSERA_REGISTRATION_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), noinline))
#else
#define TESSERA_REGISTRATION_CLONES
#endif

#endif  // TESSERA_KERNELS_REGISTRATION_CPU_CLONES_H_
