/* Pieces every method's check_update op is built from (method.h): the report a client sent
 * next to its update, the tensor names a phase takes, and one tensor's shape, finiteness and
 * bounds. Each failure is FK_EINVAL with one message naming the client, the tensor, the
 * position and the bound, never a value the client sent (the server sends it back as
 * INVALID_ARGUMENT, logs it and shows it in the job's status). */
#ifndef FK_UPDATE_CHECK_H
#define FK_UPDATE_CHECK_H

#include <stdint.h>

#include "common/methods/method.h"

/* Bound on every value a method takes from a client unless it knows a tighter one: far
 * beyond any real statistic, far enough below DBL_MAX that sums over 1e6 clients and a
 * square stay finite. */
#define FK_UPDATE_MAX_ABS 1e100

/* The report next to an update. NaN in loss, accuracy or error means "not measured" and is
 * taken; what is refused: n_samples NaN, infinite or negative (it weighs the client in every
 * mean), any infinite field, accuracy outside [0, 1]. A huge finite loss is taken: it says the
 * model diverged, and refusing it would make honest clients dropouts of a bad global model. A
 * method that always measures a field refuses NaN there itself (fk_update_check_measured). */
FK_CHECKRETURN int fk_update_check_report(const fk_report *r, int client, fk_err *err);
/* The method measures `field` (offsetof(fk_report, loss) etc.) in this phase: NaN is refused. */
FK_CHECKRETURN int fk_update_check_measured(const fk_report *r, size_t field, const char *what,
                                            int client, fk_err *err);

/* Every tensor of the update is one of names[0..n): an extra tensor is refused by name. */
FK_CHECKRETURN int fk_update_check_names(const fk_bundle *b, const char *const *names, int n,
                                         int client, fk_err *err);

/* Tensor `name`: present (`optional`: may be absent, *out = NULL), exactly this shape, every
 * value finite with |x| <= bound (and >= 0 when nonneg). */
FK_CHECKRETURN int fk_update_check_tensor(const fk_bundle *b, const char *name, int ndim,
                                          const uint64_t *shape, double bound, int nonneg,
                                          int optional, int client, const fk_tensor **out,
                                          fk_err *err);

/* Every value of t is in [lo, hi] (NaN and Inf never are) and, with whole, a whole number.
 * The refusal names the tensor, the position and the bound, never the value: nothing a
 * client sent is quoted into a log line or a job's status. */
FK_CHECKRETURN int fk_update_check_range(const fk_tensor *t, double lo, double hi, int whole,
                                         int client, fk_err *err);

#endif
