/* OpenBLAS kernels that match the CPU, chosen once at program start.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels by CPU model when the library loads and
 * falls back to generic ones (Prescott: SSE3) on models it does not know, e.g. Debian's 0.3.21
 * on recent server CPUs; dgemm then runs at a quarter of the machine's speed or less. Its only
 * override is OPENBLAS_CORETYPE, read at load time, so fedkern's programs check at the top of
 * main(): OpenBLAS runs a pre-AVX2 core on a CPU with AVX2 + FMA or AVX-512, and
 * OPENBLAS_CORETYPE is not set: then they set it (SkylakeX for AVX-512, Haswell for AVX2) and
 * execute themselves once more (/proc/self/exe, same argv), with FK_BLAS_CORE_AUTO in the
 * environment as the guard that stops a second re-execution and records what was replaced.
 * A user's own OPENBLAS_CORETYPE always wins. Every program (both daemons and the CLI) runs the
 * same rule, so on one machine they run the same kernels and compute the same model bytes; the
 * core type is part of a model's last bits (docs/numerics.md). */
#ifndef FK_BLAS_CORE_H
#define FK_BLAS_CORE_H

#include <stddef.h>

/* The guard: "GENERIC:TARGET" (e.g. "Prescott:SkylakeX"), set with OPENBLAS_CORETYPE=TARGET
 * before the re-execution; inherited by the processes a fedkern program starts. */
#define FK_BLAS_CORE_GUARD "FK_BLAS_CORE_AUTO"

/* The core type to run instead of `core` (an OpenBLAS core name) on a CPU with AVX2 + FMA
 * (`avx2`) and AVX-512 F/CD/BW/DQ/VL (`avx512`): "SkylakeX" or "Haswell" when `core` is a
 * pre-AVX2 x86 core and the CPU can do better, NULL to keep `core` (already an AVX2 or AVX-512
 * core, a core name this rule does not know, or a CPU without AVX2). */
const char *fk_blas_core_better(const char *core, int avx2, int avx512);

/* fk_blas_core_better for the core OpenBLAS runs in this process and this CPU: what a bench
 * suggests when the user's OPENBLAS_CORETYPE (or a failed re-execution) left generic kernels. */
const char *fk_blas_core_suggestion(void);

/* Called first in main(), before anything else is opened or started: when the rule above
 * applies (x86 only), sets OPENBLAS_CORETYPE and FK_BLAS_CORE_AUTO and re-executes the
 * program with argv; does not return then. Returns when nothing is to change, when the guard
 * is set (this is the re-executed process, or one started by it), or when the re-execution
 * failed: then the environment is restored, a warning names the reason on stderr and the
 * program goes on with OpenBLAS's own choice. */
void fk_blas_core_select(char **argv);

/* The log fields that say which kernels run and who chose them, into buf, each key led by
 * prefix (e.g. "blas_", or ""):
 *   "core=SkylakeX chosen_by=fedkern instead_of=Prescott"  (selected at start)
 *   "core=Haswell chosen_by=user"                          (OPENBLAS_CORETYPE from the user)
 *   "core=Cooperlake chosen_by=openblas"                   (OpenBLAS's own choice kept) */
void fk_blas_core_describe(const char *prefix, char *buf, size_t cap);

#endif
