/* Federated DICA / UDICA job types (spec dica.md §7, §8.1): one round, no raw samples
 * leave a client.
 *
 * Phase 0  every client sends n, sum x, sum |x|^2 (and sum y for regression) and its
 *          feature dimension; the server fixes sigma_x by the mean-distance rule (§4)
 *          unless the job sets `sigma`, the class count and, for regression, sigma_y.
 * Phase 1  training clients send the §7.3 statistics of their samples in the shared
 *          random-Fourier-feature space (frequencies from the job seed, common/la/rff.h):
 *          per-domain feature sums, the second moment, and for DICA the output
 *          cross-moments. The server sums them in client order and solves §7.4.
 * Phase 2  the server sends W, phi_bar, gamma (§7.5); training clients send the one-shot
 *          ridge statistics of their projections (§8.1); the server solves the predictor.
 * Phase 3  every client (also held-out ones, which never upload data statistics) gets the
 *          model and reports accuracy (classification) or RMSE in `error` (regression).
 *
 * Domains: the sample's fk_dataset.group value when the client's data carries groups,
 * else the client index (one domain per client). */
#ifndef FK_METHODS_DICA_JOB_H
#define FK_METHODS_DICA_JOB_H

#include <stddef.h>

#include "common/methods/method.h"

extern const fk_method fk_method_dica;
extern const fk_method fk_method_udica;

/* Values of one client's phase-1 upload (§7.6): 1 + Nq (D + 2) + D(D+1)/2 + Dy + D Dy +
 * Dy(Dy+1)/2 with D = 2R. Bytes on the wire are 8 per value plus names and shapes. */
size_t fk_dica_upload_values(size_t R, size_t Nq, size_t Dy);
/* Values of the phase-2 download (§7.6): D (m + 1) + m. */
size_t fk_dica_download_values(size_t R, size_t m);
/* Bytes of that upload on the wire: 8 a value (float64) plus at most FK_DICA_WIRE_OVERHEAD for
 * the tensor names, shapes and framing of the encoded bundle. */
enum { FK_DICA_WIRE_OVERHEAD = 512 };
size_t fk_dica_upload_bytes(size_t R, size_t Nq, size_t Dy);

/* Projections Z (initialised here, n x m) = (phi(X) - 1 phi_bar^T) W of the rows of X under
 * a dica/udica model bundle, with the frequencies of job seed `seed` drawn as `features`
 * ("iid" or "orthogonal", the job key); for tools that score a model centrally (bench). */
FK_CHECKRETURN int fk_dica_job_project(const fk_bundle *model, uint64_t seed, const char *features,
                                       const fk_mat *X, fk_mat *Z, fk_err *err);

#endif
