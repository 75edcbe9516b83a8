#include "common/la/blas_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/la/blas_threads.h"

/* OpenBLAS's x86 core names (driver/others/dynamic.c) whose kernels predate AVX2: what it
 * runs on a CPU model it does not know, or a CPU that cannot do better. Excavator, Haswell,
 * Zen, SkylakeX, Cooperlake and SapphireRapids are AVX2 or AVX-512 cores and stay. */
static const char *const generic_cores[] = {
    "Unknown",   "Katmai",       "Coppermine",  "Northwood",  "Prescott",    "Banias",
    "Atom",      "Core2",        "Penryn",      "Dunnington", "Nehalem",     "Athlon",
    "Opteron",   "Opteron_SSE3", "Barcelona",   "Nano",       "Sandybridge", "Bobcat",
    "Bulldozer", "Piledriver",   "Steamroller", NULL};

const char *fk_blas_core_better(const char *core, int avx2, int avx512)
{
    if (!core || !avx2)
        return NULL;
    for (int i = 0; generic_cores[i]; i++)
        if (!strcasecmp(core, generic_cores[i]))
            return avx512 ? "SkylakeX" : "Haswell";
    return NULL;
}

/* The CPU's AVX2 + FMA and AVX-512 (the subset OpenBLAS's SkylakeX kernels need); libgcc's
 * checks include the OS's support for the registers (XCR0), not only CPUID. */
static void cpu_features(int *avx2, int *avx512)
{
    *avx2 = *avx512 = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    *avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    *avx512 = *avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl");
#endif
}

const char *fk_blas_core_suggestion(void)
{
    int avx2, avx512;
    cpu_features(&avx2, &avx512);
    return fk_blas_core_better(fk_blas_core_name(), avx2, avx512);
}

/* The guard's two names ("GENERIC:TARGET"); 0 when it is unset or malformed. */
static int guard_parse(char *generic, char *target, size_t cap)
{
    const char *g = getenv(FK_BLAS_CORE_GUARD);
    const char *colon = g ? strchr(g, ':') : NULL;
    if (!colon || colon == g || !colon[1] || (size_t)(colon - g) >= cap || strlen(colon + 1) >= cap)
        return 0;
    snprintf(generic, cap, "%.*s", (int)(colon - g), g);
    snprintf(target, cap, "%s", colon + 1);
    return 1;
}

/* OPENBLAS_CORETYPE when set and not empty (OpenBLAS ignores an empty one). */
static const char *coretype_env(void)
{
    const char *ct = getenv("OPENBLAS_CORETYPE");
    return ct && *ct ? ct : NULL;
}

void fk_blas_core_select(char **argv)
{
    const char *core = fk_blas_core_name();
    const char *ct = coretype_env();
    const char *target = fk_blas_core_suggestion();
    if (getenv(FK_BLAS_CORE_GUARD)) {
        /* Re-executed already (or started by a program that was): never again, even when the
         * setting did not take, so a library that ignores it cannot make a loop. */
        char generic[64], set[64];
        if (ct && target && guard_parse(generic, set, sizeof set) && !strcasecmp(ct, set))
            fk_log(FK_LOG_WARN, "blas_core",
                   "core=%s coretype=%s msg=\"OpenBLAS did not take OPENBLAS_CORETYPE=%s (not a "
                   "DYNAMIC_ARCH build?); running its generic kernels, slower\"",
                   core, ct, ct);
        return;
    }
    if (ct)
        return; /* the user's choice wins, whatever it is */
    if (!target)
        return;
    char guard[160];
    snprintf(guard, sizeof guard, "%.64s:%s", core, target);
    if (setenv("OPENBLAS_CORETYPE", target, 1) == 0 && setenv(FK_BLAS_CORE_GUARD, guard, 1) == 0) {
        /* Nothing is buffered yet at the top of main(), but flush anyway: exec drops buffers. */
        fflush(stdout);
        fflush(stderr);
        execv("/proc/self/exe", argv);
    }
    int e = errno;
    /* Not re-executed: go on with OpenBLAS's choice, and leave no setting behind that the
     * processes this one starts would pick up (they would run other kernels than this one). */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(FK_BLAS_CORE_GUARD);
    fk_log(FK_LOG_WARN, "blas_core",
           "core=%s coretype=%s msg=\"could not re-execute with OPENBLAS_CORETYPE=%s (%s); "
           "running OpenBLAS's generic kernels, slower; set OPENBLAS_CORETYPE=%s yourself\"",
           core, target, target, strerror(e), target);
}

void fk_blas_core_describe(const char *prefix, char *buf, size_t cap)
{
    const char *core = fk_blas_core_name(), *p = prefix;
    const char *ct = coretype_env();
    char generic[64], target[64];
    if (ct && guard_parse(generic, target, sizeof generic) && !strcasecmp(ct, target))
        snprintf(buf, cap, "%score=%s %schosen_by=fedkern %sinstead_of=%s", p, core, p, p, generic);
    else
        snprintf(buf, cap, "%score=%s %schosen_by=%s", p, core, p, ct ? "user" : "openblas");
}
