/* A job's client-side method state on disk, so a restarted fedkern-client
 * continues the job where it stopped.
 *
 * One file per job in the client's state directory, "job-ID.state", written
 * after every local step (temp file, fsync, rename, fsync of the directory):
 * the method's client_save bundle and the update that step produced, with the
 * task it answered, so that a client killed between the step and the server's
 * acknowledgement resends the very same update instead of stepping twice.
 *
 * Layout (little-endian): "FKCSTATE", u32 version (2), i64 job, u32 client,
 * u32 round, u32 phase, task id[64], update id[64] (NUL-padded), SHA-256 of
 * the method name and job config [32], f64 report[5] (n_samples, loss,
 * accuracy, error, seconds), u64 state length, u64 update length, u32 method
 * name length, u32 job config length, the method name and the job config (no
 * NUL; both empty when unknown), the state bundle and the update bundle (wire
 * Bundle encoding), SHA-256 of all that [32]. Version 1 (still read) has no
 * method name and config. With them, a restarted client can rebuild a job that
 * ended but whose models still answer predictions (kahm mode B) before any
 * task of that job arrives. */
#ifndef FK_CSTATE_H
#define FK_CSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/base/err.h"

enum { FK_CSTATE_ID_MAX = 64, FK_CSTATE_MAX_BYTES = 1 << 30, FK_CSTATE_METHOD_MAX = 64,
       FK_CSTATE_CONFIG_MAX = 1 << 20 };

typedef struct fk_cstate {
    int64_t job;
    uint32_t client, round, phase;
    char task_id[FK_CSTATE_ID_MAX];   /* "JOB.ATTEMPT" of the task the step answered */
    char update_id[FK_CSTATE_ID_MAX]; /* its update's idempotency id; empty: no update (an update may be 0 bytes) */
    uint8_t digest[32];               /* fk_cstate_digest of the job */
    double report[5];                 /* n_samples, loss, accuracy, error, seconds */
    fk_bundle state;                  /* the method's client_save output */
    uint8_t *update;                  /* encoded update bundle (malloc'd), update_len bytes */
    size_t update_len;
    char *method;                     /* method name (malloc'd); NULL: unknown (version 1) */
    char *config;                     /* the job's config text (malloc'd); NULL with method */
} fk_cstate;

void fk_cstate_init(fk_cstate *s);
void fk_cstate_close(fk_cstate *s);

/* Which job a file belongs to: SHA-256 of method name, NUL, job config text. */
FK_CHECKRETURN int fk_cstate_digest(const char *method, const char *config, uint8_t out[32],
                                    fk_err *err);

/* File bytes and back. decode checks every length, the NUL-terminated ids, the
 * checksum, both bundles and that method and config match the digest; s must be
 * initialised and is filled only on FK_OK. encode writes version 2 (method and config
 * only when both are set). */
FK_CHECKRETURN int fk_cstate_encode(const fk_cstate *s, uint8_t **out, size_t *len, fk_err *err);
FK_CHECKRETURN int fk_cstate_decode(const uint8_t *buf, size_t len, fk_cstate *s, fk_err *err);

/* DIR/job-ID.state. */
FK_CHECKRETURN int fk_cstate_path(char *out, size_t cap, const char *dir, int64_t job, fk_err *err);
/* Atomic replace of the job's file. */
FK_CHECKRETURN int fk_cstate_write(const char *dir, const fk_cstate *s, fk_err *err);
/* FK_ENOTFOUND when the job has no file; FK_EFORMAT when it is not a valid one. */
FK_CHECKRETURN int fk_cstate_read(const char *dir, int64_t job, fk_cstate *s, fk_err *err);
/* Remove the job's file (no file is not an error). */
FK_CHECKRETURN int fk_cstate_remove(const char *dir, int64_t job, fk_err *err);
/* Job ids of the files in dir (malloc'd *jobs, free it). */
FK_CHECKRETURN int fk_cstate_list(const char *dir, int64_t **jobs, int *n, fk_err *err);

#endif
