/* The two DICA operations tables (dica and udica) and the ops only they use: the variant
 * wrappers of the server and client init, the client roles, the built-in data. */
#include "common/methods/dica/dica_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t SIM_STREAM = 0x6469636173000000ULL; /* built-in data */

/* The client_roles op: the holdout clients are "unseen" (test-only domains). */
FK_CHECKRETURN static int client_roles(const fk_params *p, int n_clients, const char **roles,
                                       fk_err *err)
{
    unsigned char *flags = calloc(n_clients > 0 ? (size_t)n_clients : 1, 1);
    if (!flags)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for the client roles");
    int rc = fk__dicaj_parse_holdout(fk_params_str(p, "holdout", "none"), n_clients, flags, err);
    for (int k = 0; !rc && k < n_clients; k++)
        roles[k] = flags[k] ? "unseen" : NULL;
    free(flags);
    return rc;
}

/* Built-in data: one domain per client. Three classes with shared class means; each
 * domain shifts and scales the inputs (the domain shift DICA should be invariant to). */
FK_CHECKRETURN static int sim_data(const fk_params *p, int n_clients, uint64_t seed,
                                   fk_dataset *clients, const unsigned char *want, fk_err *err)
{
    long n, d;
    int rc = fk_params_int(p, "sim_n", 150, 2, 1000000, &n, err);
    if (!rc)
        rc = fk_params_int(p, "sim_d", 5, 3, 10000, &d, err);
    const char *task = fk_params_str(p, "task", "classification");
    if (rc)
        return rc;
    int reg = !strcmp(task, "regression");
    fk_rng g;
    double *raw = malloc((size_t)n * sizeof *raw);
    if (!raw)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    for (int c = 0; c < n_clients && rc == FK_OK; c++) {
        char name[32];
        snprintf(name, sizeof name, "domain-%d", c);
        if (want && !want[c]) { /* its own stream: the others' draws do not depend on it */
            fk_dataset_set_name(&clients[c], name);
            continue;
        }
        fk_rng_init(&g, seed, SIM_STREAM + (uint64_t)c);
        if (fk_dataset_init(&clients[c], (size_t)n, (size_t)d, 0)) {
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for client %d", c);
            break;
        }
        double scale = 0.7 + 0.6 * fk_rng_uniform(&g);
        double shift[3] = {0.7 * fk_rng_normal(&g), 0.7 * fk_rng_normal(&g),
                           0.7 * fk_rng_normal(&g)};
        for (long i = 0; i < n; i++) {
            int y = (int)fk_rng_below(&g, 3);
            double *x = fk_mat_row(&clients[c].X, (size_t)i);
            for (long j = 0; j < d; j++)
                x[j] = (j == y ? 2.0 : 0.0) + (j < 3 ? shift[j] : 0.0) + scale * fk_rng_normal(&g);
            raw[i] = reg ? sin(x[0]) + x[1] - 0.5 * x[2] : (double)y;
        }
        rc = reg ? fk_dataset_set_target(&clients[c], raw, err)
                 : fk_dataset_set_labels(&clients[c], raw, err);
        if (!rc && !reg) {
            static const double cls[3] = {0, 1, 2};
            rc = fk_dataset_use_classes(&clients[c], cls, 3, err);
        }
        fk_dataset_set_name(&clients[c], name);
    }
    free(raw);
    return rc;
}

/* The variant is fixed by the table; thin wrappers pass it on. */
FK_CHECKRETURN static int srv_init_dica(void **s, const fk_params *p, int n, uint64_t seed,
                                        fk_err *err)
{
    return fk__dicaj_server_init(s, p, n, seed, FK_DICA_DICA, err);
}

FK_CHECKRETURN static int srv_init_udica(void **s, const fk_params *p, int n, uint64_t seed,
                                         fk_err *err)
{
    return fk__dicaj_server_init(s, p, n, seed, FK_DICA_UDICA, err);
}

FK_CHECKRETURN static int cli_init_dica(void **c, const fk_params *p, const fk_dataset *d, int i,
                                        int n, uint64_t seed, fk_err *err)
{
    return fk__dicaj_client_init(c, p, d, i, n, seed, FK_DICA_DICA, err);
}

FK_CHECKRETURN static int cli_init_udica(void **c, const fk_params *p, const fk_dataset *d, int i,
                                         int n, uint64_t seed, fk_err *err)
{
    return fk__dicaj_client_init(c, p, d, i, n, seed, FK_DICA_UDICA, err);
}

static int one_round(const fk_params *p)
{
    (void)p;
    return 1;
}

#define FK_DICA_TABLE(NAME, SUMMARY, SINIT, CINIT)                                                 \
    {                                                                                              \
        .name = NAME, .summary = SUMMARY, .server_init = SINIT,                                    \
        .server_close = fk__dicaj_server_close, .plan = fk__dicaj_server_plan,                     \
        .task = fk__dicaj_server_task, .aggregate = fk__dicaj_server_aggregate,                    \
        .model = fk__dicaj_server_model, .save = fk__dicaj_server_save,                            \
        .load = fk__dicaj_server_load, .finished = fk__dicaj_server_finished,                      \
        .max_rounds = one_round, .check_update = fk__dicaj_server_check, .client_init = CINIT,     \
        .predict = fk__dicaj_predict, .export_arrays = fk__dicaj_export,                           \
        .client_close = fk__dicaj_client_close, .local_step = fk__dicaj_client_step,               \
        .evaluate = fk__dicaj_client_evaluate, .client_save = fk__dicaj_client_save,               \
        .client_load = fk__dicaj_client_load, .sim_data = sim_data, .keys = fk__dicaj_keys,        \
        .client_roles = client_roles,                                                              \
    }

const fk_method fk_method_dica = FK_DICA_TABLE(
    "dica", "one-shot federated DICA (supervised domain-invariant components, random features)",
    srv_init_dica, cli_init_dica);
const fk_method fk_method_udica = FK_DICA_TABLE(
    "udica", "one-shot federated UDICA (unsupervised domain-invariant components, random features)",
    srv_init_udica, cli_init_udica);
