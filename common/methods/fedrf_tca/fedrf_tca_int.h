/* FedRF-TCA internals shared by the files of the method (not a public API):
 * the job configuration, the server and client states and the message
 * helpers. fedrf_tca.c holds the operations table. */
#ifndef FK_FEDRF_TCA_INT_H
#define FK_FEDRF_TCA_INT_H

#include "common/la/rff.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/models/fedrf_tca/classifier.h"
#include "common/models/fedrf_tca/optimizer.h"

typedef struct fk__fedrf_cfg {
    long N, m, batch, tc, rounds, classes, target, eval_every;
    double sigma, lambda, lr, eps;
    size_t hidden[FK_MLP_MAX_HIDDEN];
    int n_hidden;
    int all;          /* participation: every source every round (setting I of Tables V/VI) */
    int drop_setting; /* Table III: 1 = A/A/A, 2 = A/A/B, 3 = A/B/C */
    int voting;       /* one-shot hard voting instead of classifier averaging */
    int order;        /* fk__fedrf_order: who sends Sigma l and W (Table XVIII) */
    int common_init;  /* every client starts from the same W and classifier */
    fk_opt_kind opt;
    fk_opt_kind target_opt; /* the target's W steps (only the MMD gradient reaches it) */
    long avg_last;          /* server: also keep the mean of the last avg_last rounds' models */
    int dense;              /* extractor: 0 identity, 1 one trainable layer p -> ext_dim, ReLU */
    long ext_dim;           /* p_h of the dense extractor */
    int warm_start;         /* round 1: W from the RF-TCA closed form on pooled moments */
    double gamma;           /* its regularizer; 0 = the normalized-L value n / (n_S n_T) */
    int source_only;        /* baseline: no statistics, the target never sends W (spec §2.8) */
    double select_holdout;  /* fraction of each source's labelled rows held out to select a round */
    fk_rff_kind features; /* how Omega's frequencies are drawn */
} fk__fedrf_cfg;

/* Message senders per round. SUBSET is §2.3 step 1 with the participation
 * and Table III options; the others are Table XVIII (A)-(E): every source,
 * or one source for Sigma l and one for W, taken in cyclic order (source
 * (t-1) mod K) or uniformly at random. The classifier comes from the W sender. */
typedef enum fk__fedrf_order {
    FK__FEDRF_ORDER_SUBSET = 0,
    FK__FEDRF_ORDER_ALL,            /* (A) all / all */
    FK__FEDRF_ORDER_ORDERED,        /* (B) one cyclic source sends both */
    FK__FEDRF_ORDER_ORDERED_RANDOM, /* (C) Sigma l cyclic, W from a random source */
    FK__FEDRF_ORDER_RANDOM,         /* (D) one random source sends both */
    FK__FEDRF_ORDER_RANDOM_RANDOM   /* (E) independent random sources */
} fk__fedrf_order;

/* Parse and check the job options (both sides parse the same fk_params). */
FK_CHECKRETURN int fk__fedrf_parse_cfg(const fk_params *p, int n_clients, fk__fedrf_cfg *c,
                                       fk_err *err);

/* Classifier parameter count for the configured MLP, 0 if the layout is invalid. */
size_t fk__fedrf_classifier_params(const fk__fedrf_cfg *c, size_t classes);

/* Bundle helpers (fedrf_tca_msg.c): a scalar or dflt; put a matrix, vector or
 * scalar (FK_ENOMEM on failure); a tensor of exactly len values or NULL with
 * an FK_EFORMAT error naming it. */
double fk__fedrf_scalar(const fk_bundle *b, const char *name, double dflt);
FK_CHECKRETURN int fk__fedrf_put_mat(fk_bundle *b, const char *name, size_t r, size_t c,
                                     const double *src, fk_err *err);
FK_CHECKRETURN int fk__fedrf_put_vec(fk_bundle *b, const char *name, size_t n, const double *src,
                                     fk_err *err);
FK_CHECKRETURN int fk__fedrf_put_scalar(fk_bundle *b, const char *name, double v, fk_err *err);
const fk_tensor *fk__fedrf_want_len(const fk_bundle *b, const char *name, size_t len, fk_err *err);

/* The round-1 warm start's moments, summed as the updates are folded in (client order). */
typedef struct fk__fedrf_warm {
    int open, got, bad;  /* fold_begin ran; updates with moments; one was malformed */
    fk_err bad_err;      /* why (reported only when the warm start is solved) */
    fk_mat A;            /* sum of the scatters */
    double *mus, *mut;   /* sums of the sources' / the target's features */
    double ns, nt;       /* their row counts */
} fk__fedrf_warm;

typedef struct fk__fedrf_server {
    fk__fedrf_cfg c;
    int n;
    size_t D, WM, PC;
    long d_seen;                /* feature dimension reported by the clients */
    unsigned char *inA, *inW, *inC;
    double *s;                  /* n x D statistics of this round */
    unsigned char *has_s;
    double *Wbar, *Cbar;        /* averages of this round (phase 2) */
    int have_W, have_C;
    double *Wmodel, *Cmodel;    /* latest global model */
    double *class_values;       /* the job's listed classes (raw labels, ascending), or NULL */
    int have_Wmodel, have_Cmodel;
    double *Wsum, *Csum;        /* sums of the models of the last avg_last rounds */
    double nWsum, nCsum;        /* how many models each sum holds */
    double *votes;              /* n x PC one-shot classifiers */
    double *W0;                 /* warm start (D x m), from the round-1 moments */
    int have_W0;
    unsigned char *has_vote;
    double *Wsel, *Csel;        /* select_holdout: the candidate best on the sources' held-out rows */
    double *Vsel;               /* voting: its classifiers to vote (n x PC), has_vsel which are set */
    unsigned char *has_vsel;
    double sel_acc, sel_round;  /* its pooled held-out accuracy (-1: none yet) and round (0: the
                                 * tail average) */
    double sel_avg_acc;         /* the tail average's held-out accuracy (-1: not scored) */
    int have_sel;
    uint64_t seed;              /* the job seed: Omega's, recorded in the model for predict */
    /* the phase's aggregate in progress (fold_begin .. fold_end; nothing is saved of it) */
    fk__fedrf_warm warm;
    int f_nW, f_nWsrc, f_nC, f_got_target_W;
    double f_ok, f_cnt, f_ok_avg, f_cnt_avg;
} fk__fedrf_server;

typedef struct fk__fedrf_client {
    fk__fedrf_cfg c;
    int idx, is_target, classes;
    fk_mat X;     /* P-L2 normalized rows; a source's last X.rows - n_train are held out */
    size_t n_train;
    int *y;       /* NULL when unlabelled */
    fk_rff rff;
    fk_mlp net;
    size_t D, WM, PC, b;
    double *par;  /* W (D x m, row-major) then the classifier */
    fk_opt optW, optC;
    fk_rng rng;   /* mini-batches */
    int *perm;    /* index pool for sampling without replacement */
    fk_mat Xb, Phi; /* current mini-batch and its random features */
    int *yb;
    double *s_own, *grad, *z, *d;
    double loss;
    /* dense extractor (cfg.dense): E (p x p_h) then bias, never sent; its optimizer, gradient and
     * the mini-batch's pre-activations, normalised outputs, norms and backward buffers */
    size_t PE;
    double *ext, *gext, *hnorm;
    fk_opt optE;
    fk_mat pre, Hn, gPhi, dH;
    double evals; /* phase-2 calls, for the evaluation cadence */
    int batched;  /* a mini-batch was drawn (phase 0): phase 1 steps on it */
} fk__fedrf_client;

/* The sets of round `round` (1-based; fedrf_tca_server.c): A = the senders of
 * Sigma l (S_t) and the clients whose W and C arrive, as 0/1 flags per client. FK_ENOMEM
 * leaves the flags as they were. */
FK_CHECKRETURN int fk__fedrf_draw_sets(const fk__fedrf_cfg *c, int n, int round, fk_rng *rng,
                                       unsigned char *inA, unsigned char *inW, unsigned char *inC,
                                       fk_err *err);

/* Server operations (fedrf_tca_server.c, checkpoints in fedrf_tca_ckpt.c). */
FK_CHECKRETURN int fk__fedrf_server_init(void **out, const fk_params *p, int n_clients,
                                         uint64_t seed, fk_err *err);
void fk__fedrf_server_close(void *p);
FK_CHECKRETURN int fk__fedrf_server_plan(void *p, int round, fk_rng *rng, int *chosen,
                                         int *n_chosen, fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_task(void *p, int round, int phase, int c, fk_bundle *out,
                                         fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_aggregate(void *p, int round, int phase, const fk_update *ups,
                                              int n, int *done, fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_model(void *p, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_save(void *p, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_load(void *p, const fk_bundle *in, fk_err *err);
/* Warm start (fedrf_tca_warm.c): from every client's round-1 moments (n, sum, scatter of its
 * random features) the pooled RF-TCA closed form into s->W0 (have_W0); nothing when a client's
 * moments are missing (a dropout: the run starts from the random W). */
FK_CHECKRETURN int fk__fedrf_warm_begin(fk__fedrf_server *s, fk_err *err);
void fk__fedrf_warm_add(fk__fedrf_server *s, const fk_update *up);
FK_CHECKRETURN int fk__fedrf_warm_end(fk__fedrf_server *s, fk_err *err);
void fk__fedrf_warm_close(fk__fedrf_server *s);
/* Streaming aggregation (fk_method fold ops); aggregate is these over the updates. */
FK_CHECKRETURN int fk__fedrf_server_fold_begin(void *p, int round, int phase, fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_fold(void *p, int round, int phase, const fk_update *up,
                                         fk_err *err);
FK_CHECKRETURN int fk__fedrf_server_fold_end(void *p, int round, int phase, int *done,
                                             fk_err *err);
/* Client side: n, sum (2N) and the scatter sum phi phi^T (2N x 2N) of all its rows. */
FK_CHECKRETURN int fk__fedrf_client_moments(fk__fedrf_client *c, fk_bundle *up, fk_err *err);
/* select_holdout: does client c get the round's model to score in phase 2? And the tail
 * average too (the last round, once an average exists)? */
int fk__fedrf_sel_asked(const fk__fedrf_server *s, int c);
int fk__fedrf_sel_avg_asked(const fk__fedrf_server *s, int round, int c);
/* Does source c send its classifier in this round (phase 1)? */
int fk__fedrf_sends_c(const fk__fedrf_server *s, int round, int c);
/* check_update: each phase's update against its task (fedrf_tca_check.c). */
FK_CHECKRETURN int fk__fedrf_server_check(void *p, int round, int phase, const fk_update *up,
                                          fk_err *err);

/* Client operations (fedrf_tca_client.c, checkpoints in fedrf_tca_ckpt.c). */
FK_CHECKRETURN int fk__fedrf_client_init(void **out, const fk_params *p, const fk_dataset *data,
                                         int idx, int n_clients, uint64_t seed, fk_err *err);
void fk__fedrf_client_close(void *p);
FK_CHECKRETURN int fk__fedrf_client_step(void *p, const fk_bundle *task, fk_bundle *up,
                                         fk_report *rep, fk_err *err);
/* predict op (fedrf_tca_predict.c): the target's classifier on the learned features */
FK_CHECKRETURN int fk__fedrf_predict(const fk_bundle *model, const fk_bundle *queries,
                                     fk_bundle *out, fk_err *err);
/* The class with the most votes of k classifiers (k x n_params, one classifier: its class) on
 * each row of F, ties to the smaller class: the voting rule of the client's score and of
 * predict. Scratch: one (F->rows), tally (F->rows x classes; holds the votes on return). */
FK_CHECKRETURN int fk__fedrf_vote(const fk_mlp *net, const double *votes, size_t k,
                                  const fk_mat *F, int *one, int *tally, int *pred, fk_err *err);
/* export_arrays op: the frequencies "omega" (N x d) the model names by seed */
FK_CHECKRETURN int fk__fedrf_export(const fk_bundle *model, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedrf_client_evaluate(void *p, const fk_bundle *model, fk_report *rep,
                                             fk_err *err);
FK_CHECKRETURN int fk__fedrf_client_save(void *p, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedrf_client_load(void *p, const fk_bundle *in, fk_err *err);
/* Gradients of the client's local loss at the current mini-batch, no step: sources
 * L_C + lambda L_MMD against s_peer (may be NULL), the target the mean L_MMD against the k rows
 * of s_src; into c->grad (W then classifier) and, with the dense extractor, c->gext. */
FK_CHECKRETURN int fk__fedrf_client_grad(fk__fedrf_client *c, const fk_tensor *s_peer,
                                         const fk_tensor *s_src, double *loss, fk_err *err);
/* Dense extractor (fedrf_tca_ext.c): H = normalised ReLU(X E + b) (pre, H: n x p_h, norms: n);
 * backward takes dH = dL/dH (overwritten) and fills gE (PE values). */
void fk__fedrf_ext_forward(const fk__fedrf_client *c, const fk_mat *X, fk_mat *pre, fk_mat *H,
                           double *norms);
/* The random features of rows X (b x p) as the client trains on them: through its dense
 * extractor first when it has one (norms: b doubles of scratch). Phi is allocated. */
FK_CHECKRETURN int fk__fedrf_features(const fk__fedrf_client *c, const fk_mat *X, fk_mat *Phi,
                                      double *norms, fk_err *err);
void fk__fedrf_ext_backward(const fk__fedrf_client *c, const fk_mat *X, const fk_mat *pre,
                            const fk_mat *H, const double *norms, fk_mat *dH, double *gE);
/* Rebuild the mini-batch perm[0..b): rows, labels, random features, MMD statistic. */
FK_CHECKRETURN int fk__fedrf_client_load_batch(fk__fedrf_client *c, fk_err *err);

#endif
