/* fedkern sim fedgrem --model mor: the mixture-of-regressions simulation (spec fedgrem.md 4.3)
 * with FedGrEM, its MoR baselines and FedGMM; one line per replication plus a summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mixture/mor.h"
#include "bench/mixture/sim_fedgrem.h"
#include "bench/sim_designs.h"

/* fedkern sim fedgrem-mor [options]: `sim fedgrem --model mor` with the federated job type
 * fedgrem-mor (or --method fedem-mor, local-em-mor, local-grem-mor, pooled-grem-mor,
 * pooled-em-mor, fedgmm-mor) run through the method table. */
int fk_sim_fedgrem_mor_jobs(int argc, char **argv)
{
    int has_method = 0;
    for (int i = 0; i < argc; i++)
        has_method |= !strcmp(argv[i], "--method") || !strncmp(argv[i], "--method=", 9);
    char **av = malloc(((size_t)argc + 5) * sizeof *av);
    if (!av)
        return fk_sim_fail("sim fedgrem-mor", "out of memory"), 1;
    int n = 0;
    av[n++] = "--model";
    av[n++] = "mor";
    if (!has_method) {
        av[n++] = "--method";
        av[n++] = "fedgrem-mor";
    }
    for (int i = 0; i < argc; i++)
        av[n++] = argv[i];
    av[n] = NULL;
    int rc = fk_sim_fedgrem(n, av);
    free(av);
    return rc;
}

int fk_sim_fedgrem_mor(fk_params *p, const char *method, long rounds, long reps, uint64_t seed,
                       long K, long R, long dim, long n, long outl, double h, int json)
{
    fk_err err = {0};
    double coef;
    int rc = fk_params_double(p, "out_coef", -3.0, -1e6, 1e6, &coef, &err);
    if (rc)
        return fk_sim_fail("sim fedgrem", "%s", err.msg), 2;
    double sum_t = 0, sum_w = 0;
    int failed = 0;
    double *th = malloc((size_t)(K * R * dim) * sizeof *th), *w = malloc((size_t)(K * R) * sizeof *w);
    if (!th || !w) {
        free(th);
        free(w);
        return fk_sim_fail("sim fedgrem", "out of memory for K=%ld R=%ld p=%ld", K, R, dim), 1;
    }
    for (long s = 0; s < reps; s++) {
        uint64_t sd = seed + (uint64_t)s;
        fk_mor_data d;
        rc = fk_mor_make((int)K, (int)R, (int)dim, (int)n, (int)outl, h, coef, sd, &d, &err);
        if (rc)
            break;
        double et = 0, ew = 0;
        rc = fk_mor_run(method, p, &d, (int)rounds, sd, th, w, &err);
        if (rc == FK_OK)
            fk_mor_errors(&d, th, w, &et, &ew);
        fk_mor_data_close(&d);
        if (rc == FK_ENUMERIC) { /* a diverged replication is a result, not a crash */
            failed++;
            fprintf(stderr, "fedkern sim fedgrem: replication %llu failed: %s\n",
                    (unsigned long long)sd, err.msg);
            rc = FK_OK;
            continue;
        }
        if (rc)
            break;
        sum_t += et;
        sum_w += ew;
        if (json)
            printf("{\"sim\":\"fedgrem\",\"model\":\"mor\",\"method\":\"%s\",\"rep\":%llu,\"h\":%g,"
                   "\"outliers\":%ld,\"E_theta\":%.9g,\"E_w\":%.9g}\n",
                   method, (unsigned long long)sd, h, outl, et, ew);
        else
            printf("mor %-12s rep %4llu  h %.3g  E_theta %.4f  E_w %.4f\n", method,
                   (unsigned long long)sd, h, et, ew);
        fflush(stdout);
    }
    free(th);
    free(w);
    if (rc)
        return fk_sim_fail("sim fedgrem", "%s", err.msg), rc == FK_EINVAL ? 2 : 1;
    long ok = reps - failed;
    if (ok > 0 && reps > 1) {
        if (json)
            printf("{\"sim\":\"fedgrem\",\"model\":\"mor\",\"method\":\"%s\",\"summary\":true,"
                   "\"reps\":%ld,\"failed\":%d,\"mean_E_theta\":%.9g,\"mean_E_w\":%.9g}\n",
                   method, reps, failed, sum_t / ok, sum_w / ok);
        else
            printf("mor %-12s mean over %ld reps (%d failed): E_theta %.4f  E_w %.4f\n", method, ok,
                   failed, sum_t / ok, sum_w / ok);
    }
    return 0;
}
