/* FedGMM for mixtures of regressions (spec fedgrem.md 2.5) as a federated job, `fedgmm-mor`
 * (fedgmm_mor.c): the local step and server averages are the estimator in
 * common/models/mixture/fedgmm.h, the configuration and message checks FedGrEM's (fedgrem_int.h). */
#ifndef FK_FEDGMM_MOR_H
#define FK_FEDGMM_MOR_H

#include "common/methods/method.h"

extern const fk_method fk_method_fedgmm_mor;

#endif
