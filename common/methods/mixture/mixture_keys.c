/* The job keys of the mixture job types (method.h `keys`): what fk__fedgrem_cfg_parse
 * reads for every table of the family, and what the pooled and FedGMM tables add. */
#include "common/methods/mixture/fedgrem_int.h"

#define FK__FEDGREM_KEY_DOCS                                                                      \
    {"R N", "mixture components (5)"},                                                            \
    {"align_B N", "permutations tried when aligning client components (50)"},                     \
    {"restarts N", "Local-EM restarts per client: the best of N k-means++ starts (10)"},         \
    {"central_passes N", "0: the converged central update; N > 0: N passes of the plain "   \
                            "alternating solver (0)"},              \
    {"step_guard 0|1", "1 caps the relaxation rho_r at 1 (eta_r = 1 / w_r): no "          \
                       "oscillation, not the paper's trajectory (0; refused by the -mor types)"},                                            \
    {"c_eta X", "step-size constant: eta_r = c_eta / w0_r (0.95)"},                                             \
    {"kappa F", "assumed outlier fraction (0.1)"},                                                \
    {"C X", "constant of the penalty level lambda (2)"},                                                      \
    {"lambda0 X", "initial penalty level (1)"},                                                   \
    {"grem_step X", "gradient-EM step (0.1)"},                                                    \
    {"tgmm_lambda X", "tgmm penalty (0.4)"},                                                      \
    {"fedem_weights n|uniform", "fedem: weight clients by their sizes or equally (n)"},          \
    {"local_init kmeans|hc", "Local-EM start: k-means++ restarts or mclust's hierarchical "      \
                             "partition (kmeans; hc for Gaussian mixtures only)"}

const fk_param_doc fk__fedgrem_keys[] = {
    FK__FEDGREM_KEY_DOCS,
    {NULL, NULL},
};

const fk_param_doc fk__pooled_keys[] = {
    FK__FEDGREM_KEY_DOCS,
    {"max_repeats N", "rounds in a row that may lack a client before the job fails (20)"},
    {NULL, NULL},
};

const fk_param_doc fk__fedgmm_mor_keys[] = {
    FK__FEDGREM_KEY_DOCS,
    {"fedgmm_R1 N", "x-components (3)"},
    {"fedgmm_cov all|first", "all, or first: the reference's average of the first component's "
                             "covariance (all)"},
    {NULL, NULL},
};
