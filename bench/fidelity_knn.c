/* fedkern bench fidelity knn: 1-NN accuracy on the 12 Office-Caltech10 SURF
 * source->target pairs (L1 then zscore(X,1) per domain), next to the published 1NN
 * row (jindongwang/transferlearning data/benchmark.md, quoted in shared/data/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/knn.h"
#include "common/base/params.h"
#include "common/data/catalog.h"

static const char *const domains[4] = {"caltech", "amazon", "webcam", "dslr"};
static const char letters[4] = {'C', 'A', 'W', 'D'};

/* The 12 pairs in the order of the published table, with its 1NN accuracies (%). */
static const struct {
    int src, tgt;
    double published;
} pairs[12] = {
    {0, 1, 23.7}, {0, 2, 25.8}, {0, 3, 25.5}, {1, 0, 26.0}, {1, 2, 29.8}, {1, 3, 25.5},
    {2, 0, 19.9}, {2, 1, 23.0}, {2, 3, 59.2}, {3, 0, 26.3}, {3, 1, 28.5}, {3, 2, 63.4},
};
static const double published_average = 31.4;

static int fail(const char *msg)
{
    fprintf(stderr, "fedkern bench: fidelity knn: %s\n", msg);
    return 1;
}

/* Accuracy (%) of 1-NN trained on src, tested on tgt. */
FK_CHECKRETURN static int pair_accuracy(const fk_dataset *src, const fk_dataset *tgt, double *acc, fk_err *err)
{
    int rc = fk_dataset_check_dims(src, tgt, err);
    if (rc)
        return rc;
    int *pred = malloc(tgt->X.rows * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    rc = fk_knn1_predict(&src->X, src->y, &tgt->X, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < tgt->X.rows; i++)
        hit += pred[i] == tgt->y[i];
    free(pred);
    *acc = 100.0 * (double)hit / (double)tgt->X.rows;
    return rc;
}

static int run(int argc, char **argv)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: fedkern bench fidelity knn [--data_dir DIR] [--json]\n\n"
                   "1-NN accuracy on the 12 Office-Caltech10 SURF pairs (L1 + zscore per domain)\n"
                   "next to the published 1NN figures; DIR defaults to ../shared/data.\n");
            fk_params_close(&p);
            return 0;
        }
    int json = 0, rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &json, &err);
    const char *dir = fk_params_str(&p, "data_dir", "../shared/data");
    if (!rc && (argc > 0 || fk_params_unused(&p))) {
        fprintf(stderr, "fedkern bench: fidelity knn: unexpected argument '%s'; see --help\n",
                argc > 0 ? argv[0] : fk_params_unused(&p));
        fk_params_close(&p);
        return 2;
    }
    if (!rc)
        rc = fk_bench_data_dir(dir, &err);
    fk_dataset ds[4] = {0};
    if (!rc)
        rc = fk_bench_load_surf(ds, domains, dir, &err);
    double sum = 0;
    for (int k = 0; k < 12 && !rc; k++) {
        double acc = 0;
        rc = pair_accuracy(&ds[pairs[k].src], &ds[pairs[k].tgt], &acc, &err);
        if (rc)
            break;
        char case_name[32], extra[64];
        snprintf(case_name, sizeof case_name, "knn %c->%c", letters[pairs[k].src], letters[pairs[k].tgt]);
        snprintf(extra, sizeof extra, "\"published\":%.1f", pairs[k].published);
        fk_bench_emit(json, "fidelity", case_name, "accuracy", acc, extra);
        sum += acc;
    }
    if (!rc) {
        char extra[64];
        snprintf(extra, sizeof extra, "\"published\":%.1f", published_average);
        fk_bench_emit(json, "fidelity", "average", "accuracy", sum / 12.0, extra);
    }
    for (int i = 0; i < 4; i++)
        fk_dataset_close(&ds[i]);
    fk_params_close(&p);
    return rc ? fail(err.msg) : 0;
}

int fk_bench_fidelity_knn(int argc, char **argv)
{
    return run(argc, argv);
}
