/* Job type `sfl`: one-shot federated sparse functional kernel learning by critical samples
 * (Peifer 2021 Ch. 3, Alg. 2-4; spec 004 §6). Clients solve their local problem and upload,
 * once, their critical rows (dual > 0) with the duals; the server solves on the union and
 * returns the model once. RAW ROWS LEAVE THE CLIENTS: the job needs
 * raw_sample_upload = acknowledged and each client's own local.allow_raw_upload = true. */
#ifndef FK_METHODS_SFL_H
#define FK_METHODS_SFL_H

#include <stddef.h>
#include <stdint.h>

#include "common/data/dataset.h"
#include "common/methods/method.h"

extern const fk_method fk_method_sfl;

/* The E3.1 generator (dissertation (3.37), spec §11 layout): y = 1 inside either ellipse
 * (x - c_i)^T diag(1, 0.25) (x - c_i) <= r_i (c_1 = (3, 0), r_1 = 9; c_2 = (-10, 6), r_2 = 30),
 * else 0, then x += N(0, 0.2) noise. Client k draws n rows uniformly in its cell of a g x g
 * grid (g = ceil(sqrt(K))) over [-18, 9] x [-9, 18], cells enlarged by 2 per side; k = -1
 * draws n test rows uniformly over the whole box. Labels raw 0/1. */
FK_CHECKRETURN int fk_sfl_e31_make(int K, int k, size_t n, uint64_t seed, fk_dataset *out,
                                   fk_err *err);

/* Multiclass data for multiclass = ovo: one Gaussian blob per class (sd 0.7, centres on a
 * circle, neighbours 4 apart), raw labels cls[0..n_cls) (2 to 32, ascending). Client k of K
 * holds every class but k mod n_cls (all of them when K = 1), in turn, n rows; k = -1 draws a
 * test set of every class. */
FK_CHECKRETURN int fk_sfl_blobs_make(const double *cls, int n_cls, int K, int k, size_t n,
                                     uint64_t seed, fk_dataset *out, fk_err *err);

#endif
