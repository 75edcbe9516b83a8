/* Splitting n samples across K federated clients: IID, Dirichlet(alpha) label
 * skew, or one client per group (domain, writer, ...).
 *
 * Ownership: the fk_partition owns its arrays; fk_partition_client returns a
 * view into them that stays valid until fk_partition_close. Every sample goes
 * to exactly one client, and indices are ascending within a client. All
 * randomness comes from the caller's fk_rng, so a seed fixes the split. */
#ifndef FK_PARTITION_H
#define FK_PARTITION_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/rng.h"

typedef struct fk_partition {
    int n_clients;
    size_t n;       /* samples partitioned (0..n-1) */
    size_t *offset; /* n_clients + 1 entries: client k owns index[offset[k] .. offset[k+1]) */
    int *index;     /* n sample indices grouped by client */
    int *group;     /* fk_partition_group: the group id each client holds; NULL otherwise */
} fk_partition;

/* Shuffle and deal equal shares: sizes differ by at most one (the first n % K
 * clients get one more). 1 <= n_clients <= n. */
int fk_partition_iid(fk_partition *p, size_t n, int n_clients, fk_rng *rng, fk_err *err);

/* Label skew: for each class, its samples are shuffled and cut in proportions drawn
 * from Dirichlet(alpha, ..., alpha) over the clients (Gamma(alpha) draws, normalised).
 * Small alpha concentrates each class on few clients; large alpha approaches IID.
 * The draw is repeated until every client has at least min_per_client samples
 * (0 accepts any draw); after 1000 failed draws it gives FK_ENUMERIC.
 * y[i] in [0, n_classes); 1 <= n_clients <= n; alpha > 0. */
int fk_partition_dirichlet(fk_partition *p, const int *y, size_t n, int n_classes, int n_clients,
                           double alpha, size_t min_per_client, fk_rng *rng, fk_err *err);

/* One client per distinct group id (ids >= 0), clients ordered by increasing id. */
int fk_partition_group(fk_partition *p, const int *group, size_t n, fk_err *err);

size_t fk_partition_size(const fk_partition *p, int client);
/* Client's sample indices (fk_partition_size of them). */
const int *fk_partition_client(const fk_partition *p, int client);
void fk_partition_close(fk_partition *p);

#endif
