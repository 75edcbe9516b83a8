/* A stand-in for OpenBLAS's core report, preloaded (LD_PRELOAD) by tests/cli_blas_core.sh so
 * the start-up core selection (common/la/blas_core.c) can be driven on any x86 machine:
 * openblas_get_corename() answers FK_TEST_FAKE_CORE (Prescott when unset), as an OpenBLAS
 * would on a CPU model it does not know, unless OPENBLAS_CORETYPE is set, which it then
 * answers like OpenBLAS does; FK_TEST_FAKE_CORE_STUCK makes it ignore OPENBLAS_CORETYPE (a
 * library the setting does not reach). Each program start (each exec) appends the program's
 * path to the file FK_TEST_FAKE_CORE_STARTS names, so the test counts re-executions (and can
 * tell them from `timeout`, which the shim is loaded into as well). The kernels
 * that run are the real OpenBLAS's. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

const char *openblas_get_corename(void);

const char *openblas_get_corename(void)
{
    const char *ct = getenv("OPENBLAS_CORETYPE");
    const char *fake = getenv("FK_TEST_FAKE_CORE");
    if (ct && *ct && !getenv("FK_TEST_FAKE_CORE_STUCK"))
        return ct;
    return fake ? fake : "Prescott";
}

__attribute__((constructor)) static void count_start(void)
{
    const char *path = getenv("FK_TEST_FAKE_CORE_STARTS");
    if (!path)
        return;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return;
    exe[len++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0)
        return;
    ssize_t n = write(fd, exe, (size_t)len);
    (void)n; /* a short write shows up as a failed count in the test */
    close(fd);
}
