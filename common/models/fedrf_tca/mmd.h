/* MMD loss in random-feature space (spec §1.10, paper Eq. (11)):
 * d = s_src + s_tgt (mean source embedding minus mean target embedding, the
 * target message carries the minus sign), z = W^T d, L = |z|^2. */
#ifndef FK_MMD_H
#define FK_MMD_H

#include <stddef.h>

#include "common/la/mat.h"

/* out[0..cols) = sign / rows * sum of the rows of Z (the message s = Sigma l). */
void fk_mmd_embedding(const fk_mat *Z, double sign, double *out);

/* L = |W^T d|^2 with W (D x m), d (D). If gW is not NULL, gW += scale * 2 d z^T;
 * if gd is not NULL, gd = 2 W z. z (m values) is scratch. */
double fk_mmd_loss(const fk_mat *W, const double *d, double scale, fk_mat *gW, double *gd,
                   double *z);

#endif
