/* The distributional kernel of spec dica.md §8.3 (eq. 14 of the paper; optional and
 * centralised): a kernel on (domain, sample) pairs, the product of a Gaussian kernel on the
 * domains' kernel mean embeddings and the sample kernel. */
#include "common/models/dica/dica.h"
#include "common/models/dica/dica_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int fk_dica_dist_kernel(const fk_mat *K2, const long *dom, double sigma1, fk_mat *K,
                        fk_err *err)
{
    *K = (fk_mat){0};
    size_t n = K2->rows;
    if (K2->cols != n || n == 0)
        return fk_err_set(err, FK_EINVAL, "dica: the sample kernel must be square and non-empty "
                                          "(got %zu x %zu)", K2->rows, K2->cols);
    if (!(sigma1 > 0))
        return fk_err_set(err, FK_EINVAL, "dica: sigma1 must be > 0 (got %g; +inf = pooling)",
                          sigma1);
    for (size_t i = 0; i < n; i++) {
        if (dom[i] < 0)
            return fk_err_set(err, FK_EINVAL, "dica: sample %zu has negative domain id %ld", i,
                              dom[i]);
        if (!fk__dica_all_finite(fk_mat_row(K2, i), n))
            return fk_err_set(err, FK_EINVAL, "dica: sample kernel row %zu has a NaN or Inf", i);
    }
    /* Domain index of every sample (ids in order of first appearance). */
    size_t N = 0, *di = malloc(n * sizeof *di);
    long *ids = malloc(n * sizeof *ids);
    double *cnt = calloc(n, sizeof *cnt), *M = NULL, *G = NULL;
    int rc = di && ids && cnt ? FK_OK : fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (!rc)
        N = fk__dica_domain_index(dom, n, ids, di, cnt);
    /* G_ij = mean of K2 over domain i x domain j, through the n x N row means M. */
    if (!rc) {
        M = calloc(n * N, sizeof *M);
        G = calloc(N * N, sizeof *G);
        if (!M || !G || fk_mat_init(K, n, n))
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for %zu domains", N);
    }
    for (size_t a = 0; !rc && a < n; a++)
        for (size_t b = 0; b < n; b++)
            M[a * N + di[b]] += K2->data[a * K2->ld + b] / cnt[di[b]];
    for (size_t a = 0; !rc && a < n; a++)
        for (size_t j = 0; j < N; j++)
            G[di[a] * N + j] += M[a * N + j] / cnt[di[a]];
    /* k1 over domain pairs, then the product; sigma1 = inf is the pooling kernel (k1 = 1). */
    for (size_t i = 0; !rc && i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double d2 = G[i * N + i] + G[j * N + j] - G[i * N + j] - G[j * N + i];
            M[i * N + j] = isinf(sigma1) ? 1.0 : exp(-(d2 > 0 ? d2 : 0) / (2 * sigma1 * sigma1));
        }
    for (size_t a = 0; !rc && a < n; a++)
        for (size_t b = 0; b < n; b++)
            K->data[a * K->ld + b] = M[di[a] * N + di[b]] * K2->data[a * K2->ld + b];
    free(di);
    free(ids);
    free(cnt);
    free(M);
    free(G);
    if (rc)
        fk_mat_close(K);
    return rc;
}
