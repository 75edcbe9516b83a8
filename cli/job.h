/* The admin side of `fedkern job` as calls, shared by the job command and the demo:
 * one mTLS connection to a fedkern-server, unary RPCs run to completion. Every
 * function prints its failure as "fedkern CMD: ..." and returns non-zero. */
#ifndef FK_CLI_JOB_H
#define FK_CLI_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/base/params.h"
#include "fedkern.pb.h"

typedef struct fk_job_conn fk_job_conn;

/* Connect with the params server, server_name, tls_dir, name, timeout_ms (the job
 * command's connection options). Returns 0, 1 (failure) or 2 (bad options). */
int fk_job_open(fk_job_conn **c, const fk_params *p, const char *cmd);
void fk_job_close(fk_job_conn *c);

/* SubmitJob with the job file text; the job id into id. */
int fk_job_submit_text(fk_job_conn *c, const char *text, char *id, size_t cap);
/* JobStatus; round > 0 asks for that closed round's metrics instead of the last one's. */
int fk_job_status_get(fk_job_conn *c, const char *id, uint32_t round,
                      fedkern_v1_JobStatusResponse *out);
/* JobResult of a finished job: the model as an encoded fedkern.v1.Bundle (caller frees). */
int fk_job_model_get(fk_job_conn *c, const char *id, uint8_t **model, size_t *len);
/* Predict: the server's answer ("labels", "distances", ...) for the queries bundle (tensor
 * "X", n x p) from job id's model, into result (an empty bundle the caller closes). A job
 * whose models stay on the clients waits up to timeout_s seconds for their answers; the
 * result then names "unscored_classes" and "missing_clients". */
int fk_job_predict(fk_job_conn *c, const char *id, const fk_bundle *queries, long timeout_s,
                   fk_bundle *result);

const char *fk_jobcli_state_name(int state);
/* Metric `name` of a status answer, NaN if absent. */
double fk_job_metric(const fedkern_v1_Metric *m, int n, const char *name);

#endif
