/* Error codes and the error report every fallible fedkern call fills in. */
#ifndef FK_ERR_H
#define FK_ERR_H

#include <stddef.h>

enum fk_status {
    FK_OK = 0,
    FK_EINVAL = -1,   /* bad argument or parameter */
    FK_ENOMEM = -2,   /* allocation failed */
    FK_EIO = -3,      /* read/write/open failed */
    FK_EFORMAT = -4,  /* malformed input bytes */
    FK_ENUMERIC = -5, /* numerical failure (not positive definite, no convergence) */
    FK_ESTATE = -6,   /* call not valid in the current state */
    FK_ENET = -7,     /* network or protocol failure */
    FK_ELIMIT = -8,   /* a configured limit was exceeded */
    FK_ENOTFOUND = -9 /* named thing does not exist */
};

/* Marks a fallible function (returns FK_OK or an FK_E* code): under -Werror the compiler
 * refuses a call that drops the result, like nanopb's `checkreturn`. GCC does not accept a
 * (void) cast as handling it: use the code (or test it and say why it may be ignored). */
#if defined(__GNUC__) || defined(__clang__)
#define FK_CHECKRETURN __attribute__((warn_unused_result))
#else
#define FK_CHECKRETURN
#endif

/* One human-readable message: what failed, where, and what to do. */
typedef struct fk_err {
    int code;
    char msg[512];
} fk_err;

/* Record an error (printf-style) and return its code, so callers can write
 * `return fk_err_set(err, FK_EINVAL, "...")`. A NULL err is allowed. */
int fk_err_set(fk_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the message a failed call left in err with context ("file.csv: " + msg) and return
 * code, the failed call's result (never FK_OK), so callers can write
 * `return fk_err_prefix(err, rc, "file.csv: ")`: a NULL err still returns the failure. */
int fk_err_prefix(fk_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void fk_err_clear(fk_err *err);
const char *fk_status_name(int code);

#endif
