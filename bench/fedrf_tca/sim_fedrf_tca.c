/* fedkern sim fedrf-tca: K source clients and one target client in one
 * process, driven through the fedrf-tca operations table by fk_sim_run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fedrf_tca/sim_fedrf_tca.h"
#include "bench/sim_designs.h"
#include "common/base/options.h"
#include "common/base/params.h"
#include "common/data/synth_shift.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/sim.h"

static const char *const HELP =
    "usage: fedkern sim fedrf-tca [options]\n"
    "\n"
    "Federated domain adaptation with random-feature TCA (FedRF-TCA): labelled source\n"
    "clients and one unlabelled target client exchange only mean random-feature\n"
    "statistics (2N values), the adaptive layer W_RF (2N x m) and, every T_C rounds,\n"
    "the classifier. Data: the built-in synthetic domain shift, or Office-Caltech10\n"
    "SURF domains from --data_dir.\n"
    "\n"
    "options:\n"
    "  --data_dir DIR        shared data directory (Office-Caltech10 SURF)\n"
    "  --source A,C,D        source domains (A amazon, C caltech, W webcam, D dslr)\n"
    "  --target W            target domain\n"
    "  --synthetic           use the built-in synthetic shift data (default without --data_dir)\n"
    "  --sources K           synthetic: number of source clients (default 3)\n"
    "  --N N                 random frequencies (default 1000; 200 on synthetic data)\n"
    "  --m M                 adaptive-layer width (default 100; 20 on synthetic data)\n"
    "  --sigma S             Gaussian kernel width (default 1)\n"
    "  --features iid|orthogonal   Omega's frequencies i.i.d. (default, the paper's) or in\n"
    "                        orthogonal blocks (smaller kernel error at the same N)\n"
    "  --lambda L            MMD weight in the source loss (default 1; 0 = no Sigma-l messages)\n"
    "  --lr LR               learning rate (default 1e-3)\n"
    "  --optimizer adam|sgd  (default adam)\n"
    "  --batch B             mini-batch size (default 128)\n"
    "  --hidden 100,100      classifier hidden layers (default 100,100; none = softmax)\n"
    "  --rounds R            rounds (default 300)\n"
    "  --tc T                classifier averaging interval T_C (default 50)\n"
    "  --participation random|all   S_t uniform-size random subset (default) or all sources\n"
    "  --drop_setting I|II|III      Table III message-drop setting (default I)\n"
    "  --drop P              probability that any update is lost in transit (default 0)\n"
    "  --voting              one-shot hard voting of the source classifiers at the end\n"
    "  --order O             senders per round: subset (default: S_t and --drop_setting), or\n"
    "                        Table XVIII all, ordered, ordered-random, random, random-random\n"
    "  --common_init         every client starts from the same W_RF and classifier\n"
    "  --target_opt adam|sgd optimizer of the target's W (default: --optimizer)\n"
    "  --avg_last R          also report the model averaged over the last R rounds\n"
    "  --extractor identity|dense   fixed inputs (default) or one local trainable layer\n"
    "                        (p -> ext_dim, ReLU), trained by every client, never sent\n"
    "  --ext_dim H           width of the dense extractor (default 256)\n"
    "  --select_holdout F    each source holds out F of its labelled rows; the round model (or\n"
    "                        the --avg_last average) best on them is reported too (no target label)\n"
    "  --warm_start 1        round 1 starts W_RF from the RF-TCA closed form of the pooled\n"
    "                        moments (each client sends n, sum and scatter of its features once)\n"
    "  --gamma G             its regularizer (default n / (n_S n_T), normalized-L lambda = 1)\n"
    "  --eval_every E        target accuracy every E rounds (default 1)\n"
    "  --seed S              seed of Omega, initialisation, batches and plans (default 1)\n"
    "  --json                JSON lines instead of text\n";

typedef struct run_ctx {
    int json;
    const fk_params *p;
    int n_clients;
    uint64_t seed;
} run_ctx;

static void progress(const fk_sim_round *r, void *vp)
{
    const run_ctx *c = vp;
    fk_rng rng;
    fk_err err = {0};
    int na = 0, nw = 0, nc = 0;
    fk_sim_plan_rng(&rng, c->seed, r->round);
    if (fk_fedrf_round_sets(c->p, c->n_clients, r->round, &rng, &na, &nw, &nc, &err))
        na = nw = nc = -1; /* the counts are only reported: -1 = could not be recomputed */
    if (c->json)
        printf("{\"round\":%d,\"participants\":%d,\"w_senders\":%d,\"c_senders\":%d,\"loss\":%.6g,"
               "\"target_accuracy\":%.6g,\"bytes\":%llu,\"seconds\":%.4f}\n",
               r->round, na, nw, nc, isnan(r->loss) ? -1.0 : r->loss,
               isnan(r->accuracy) ? -1.0 : 100.0 * r->accuracy, (unsigned long long)r->bytes,
               r->seconds);
    else if (isnan(r->accuracy))
        printf("round %4d  S_t %2d  loss %9.5f  target acc      -    bytes %10llu\n", r->round,
               na, r->loss, (unsigned long long)r->bytes);
    else
        printf("round %4d  S_t %2d  loss %9.5f  target acc %6.2f %%  bytes %10llu\n", r->round,
               na, r->loss, 100.0 * r->accuracy, (unsigned long long)r->bytes);
    fflush(stdout);
}

static void print_counts(int json, const char *what, const fk_fedrf_counts *k)
{
    if (json) {
        printf("{\"message_params\":\"%s\",\"w_rf\":%zu,\"classifier\":%zu,\"model\":%zu,"
               "\"sigma_paper\":%zu,\"sigma_sent\":%zu,\"total_paper\":%zu,\"total_sent\":%zu,"
               "\"select_down\":%zu,\"select_up\":%zu}\n",
               what, k->w_rf, k->classifier, k->model, k->sigma_paper, k->sigma_sent,
               k->total_paper, k->total_sent, k->select_down, k->select_up);
        return;
    }
    printf("%s: W_RF %zu + classifier %zu = model %zu; Sigma l %zu (paper counts N) / %zu sent; "
           "per update %.6f M (paper convention) / %.6f M (sent)\n",
           what, k->w_rf, k->classifier, k->model, k->sigma_paper, k->sigma_sent,
           k->total_paper / 1e6, k->total_sent / 1e6);
    printf("  with select_holdout: per source and round %zu values down (the model to score), %zu "
           "up (counts); the last round once more for the tail average\n",
           k->select_down, k->select_up);
}

/* Copy an option into the method's parameter name if given; a copy that cannot be made (out of
 * memory) is remembered in *failed, so the run stops instead of using a default silently. */
static void pass(fk_params *dst, const fk_params *src, const char *opt, const char *key,
                 const char *dflt, int *failed)
{
    const char *v = fk_params_get(src, opt);
    if ((v || dflt) && fk_params_set(dst, key, v ? v : dflt))
        *failed = 1;
}

/* Every option of this runner (the HELP text describes them). */
static const fk_param_doc opts[] = {
    {"data_dir", ""}, {"source", ""},   {"target", ""}, {"synthetic", ""}, {"sources", ""},
    {"N", ""},        {"m", ""},        {"sigma", ""},  {"features", ""},  {"lambda", ""},
    {"lr", ""},       {"optimizer", ""}, {"batch", ""}, {"hidden", ""},    {"rounds", ""},
    {"tc", ""},       {"participation", ""}, {"drop_setting", ""}, {"drop", ""},
    {"voting", ""},   {"order", ""},    {"common_init", ""}, {"eval_every", ""}, {"seed", ""},
    {"target_opt", ""}, {"avg_last", ""}, {"extractor", ""}, {"ext_dim", ""}, {"warm_start", ""},
    {"gamma", ""},    {"select_holdout", ""}, {"json", ""},     {"help", ""},     {NULL, NULL},
};

int fk_sim_fedrf_tca(int argc, char **argv)
{
    fk_params a, p;
    fk_err err = {0};
    fk_params_init(&a);
    fk_params_init(&p);
    fk_dataset *ds = NULL;
    int n_clients = 0, rc = 1;
    if (fk_params_parse_args(&a, &argc, argv, &err)) {
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        rc = 2;
        goto out;
    }
    if (fk_params_get(&a, "help")) {
        fputs(HELP, stdout);
        rc = 0;
        goto out;
    }
    if (argc > 0) {
        fk_sim_fail("sim fedrf-tca", "unexpected argument '%s'; see --help", argv[0]);
        rc = 2;
        goto out;
    }
    const fk_option_table known[] = {{opts, NULL}, {NULL, NULL}};
    if ((rc = fk_options_check(&a, known, "fedkern sim fedrf-tca", NULL, 0, stderr)))
        goto out;
    rc = 1;
    int json = 0, voting = 0, common_init = 0;
    long rounds, seed_l;
    if (fk_params_bool(&a, "json", 0, &json, &err) ||
        fk_params_bool(&a, "voting", 0, &voting, &err) ||
        fk_params_bool(&a, "common_init", 0, &common_init, &err) ||
        fk_params_int(&a, "rounds", 300, 1, 100000000, &rounds, &err) ||
        fk_params_int(&a, "seed", 1, 0, 0x7fffffffffffffffL, &seed_l, &err)) {
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        rc = 2;
        goto out;
    }
    double drop;
    if (fk_params_double(&a, "drop", 0.0, 0.0, 0.999, &drop, &err)) {
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        rc = 2;
        goto out;
    }
    int unset = 0; /* a job parameter could not be stored */
    int synthetic = fk_params_get(&a, "synthetic") || !fk_params_get(&a, "data_dir");
    if (fk_fedrf_sim_load(&a, synthetic, &ds, &n_clients, &err)) {
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        goto out;
    }
    pass(&p, &a, "N", "N", synthetic ? "200" : "1000", &unset);
    pass(&p, &a, "m", "m", synthetic ? "20" : "100", &unset);
    pass(&p, &a, "sigma", "sigma", NULL, &unset);
    pass(&p, &a, "features", "features", NULL, &unset);
    pass(&p, &a, "lambda", "lambda", NULL, &unset);
    pass(&p, &a, "lr", "lr", NULL, &unset);
    pass(&p, &a, "optimizer", "optimizer", NULL, &unset);
    pass(&p, &a, "batch", "batch", NULL, &unset);
    pass(&p, &a, "hidden", "hidden", NULL, &unset);
    pass(&p, &a, "tc", "tc", NULL, &unset);
    pass(&p, &a, "participation", "participation", NULL, &unset);
    pass(&p, &a, "drop_setting", "drop_setting", NULL, &unset);
    pass(&p, &a, "eval_every", "eval_every", NULL, &unset);
    pass(&p, &a, "order", "order", NULL, &unset);
    pass(&p, &a, "target_opt", "target_opt", NULL, &unset);
    pass(&p, &a, "avg_last", "avg_last", NULL, &unset);
    pass(&p, &a, "extractor", "extractor", NULL, &unset);
    pass(&p, &a, "ext_dim", "ext_dim", NULL, &unset);
    pass(&p, &a, "warm_start", "warm_start", NULL, &unset);
    pass(&p, &a, "gamma", "gamma", NULL, &unset);
    pass(&p, &a, "select_holdout", "select_holdout", NULL, &unset);
    unset |= fk_params_set(&p, "voting", voting ? "1" : "0") != FK_OK;
    unset |= fk_params_set(&p, "common_init", common_init ? "1" : "0") != FK_OK;
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", rounds);
    unset |= fk_params_set(&p, "rounds", buf) != FK_OK;
    snprintf(buf, sizeof buf, "%d", ds[0].n_classes);
    unset |= fk_params_set(&p, "classes", buf) != FK_OK;
    if (unset) {
        fk_sim_fail("sim fedrf-tca", "out of memory for the job parameters");
        goto out;
    }
    const char *unused = fk_params_unused(&a);
    if (unused) {
        fk_sim_fail("sim fedrf-tca", "unknown option --%s; see --help", unused);
        rc = 2;
        goto out;
    }
    run_ctx ctx = {.json = json, .p = &p, .n_clients = n_clients, .seed = (uint64_t)seed_l};
    /* a dense extractor lives in the clients only: the live target scores the final model */
    int dense = !strcmp(fk_params_str(&p, "extractor", "identity"), "dense");
    fk_report *finals = dense ? calloc((size_t)n_clients, sizeof *finals) : NULL;
    if (dense && !finals) {
        fk_sim_fail("sim fedrf-tca", "out of memory");
        goto out;
    }
    fk_sim_opts o = {.rounds = (int)rounds, .seed = (uint64_t)seed_l, .drop = drop,
                     .progress = progress, .ctx = &ctx, .final_reports = finals};
    fk_bundle model;
    fk_sim_round last;
    const fk_method *m = &fk_method_fedrf_tca;
    if (fk_sim_run(m, &p, ds, n_clients, &o, &model, &last, &err)) {
        free(finals);
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        goto out;
    }
    if (dense) {
        double acc = finals[n_clients - 1].accuracy;
        free(finals);
        fk_bundle_close(&model);
        if (json)
            printf("{\"final_target_accuracy\":%.6g,\"rounds\":%ld,\"clients\":%d}\n",
                   100.0 * acc, rounds, n_clients);
        else
            printf("final model on target '%s' (its own extractor): accuracy %.2f %% (%ld rounds, "
                   "%d sources); the averaged model needs the live target, see fedkern bench "
                   "fidelity rf-tca --fed2\n",
                   ds[n_clients - 1].name, 100.0 * acc, rounds, n_clients - 1);
        rc = 0;
        goto out;
    }
    /* Score the server's final model on the target client's data. */
    void *cli = NULL;
    fk_report rep;
    fk_report_init(&rep);
    int tgt = n_clients - 1;
    if (m->client_init(&cli, &p, &ds[tgt], tgt, n_clients, (uint64_t)seed_l, &err) ||
        m->evaluate(cli, &model, &rep, &err)) {
        if (cli)
            m->client_close(cli);
        fk_bundle_close(&model);
        fk_sim_fail("sim fedrf-tca", "final evaluation: %s", err.msg);
        goto out;
    }
    /* The tail average of the last avg_last rounds (if asked), scored the same way. */
    fk_report rep_avg;
    fk_report_init(&rep_avg);
    double *flag = fk_bundle_get(&model, "W_avg") ? fk_bundle_add(&model, "use_avg", 0, NULL)
                                                  : NULL;
    if (flag) {
        *flag = 1;
        if (m->evaluate(cli, &model, &rep_avg, &err)) {
            m->client_close(cli);
            fk_bundle_close(&model);
            fk_sim_fail("sim fedrf-tca", "final evaluation of the averaged model: %s", err.msg);
            goto out;
        }
    }
    /* The model selected on the sources' held-out rows (select_holdout), scored the same way. */
    fk_report rep_sel;
    fk_report_init(&rep_sel);
    double sel_round = fk_bundle_get(&model, "sel_round") ? fk_bundle_get(&model, "sel_round")->data[0]
                                                          : -1;
    double *sflag = fk_bundle_get(&model, "W_sel") ? fk_bundle_add(&model, "use_sel", 0, NULL)
                                                   : NULL;
    if (sflag) {
        *sflag = 1;
        if (m->evaluate(cli, &model, &rep_sel, &err)) {
            m->client_close(cli);
            fk_bundle_close(&model);
            fk_sim_fail("sim fedrf-tca", "final evaluation of the selected model: %s", err.msg);
            goto out;
        }
    }
    m->client_close(cli);
    fk_bundle_close(&model);
    if (json)
        printf("{\"final_target_accuracy\":%.6g,\"avg_target_accuracy\":%.6g,"
               "\"selected_target_accuracy\":%.6g,\"selected_round\":%g,\"rounds\":%ld,"
               "\"clients\":%d}\n",
               100.0 * rep.accuracy, flag ? 100.0 * rep_avg.accuracy : -1.0,
               sflag ? 100.0 * rep_sel.accuracy : -1.0, sel_round, rounds, n_clients);
    else {
        printf("final model on target '%s': accuracy %.2f %% (%ld rounds, %d sources)\n",
               ds[tgt].name, 100.0 * rep.accuracy, rounds, n_clients - 1);
        if (flag)
            printf("model averaged over the last rounds: accuracy %.2f %%\n",
                   100.0 * rep_avg.accuracy);
        if (sflag && sel_round == 0)
            printf("selected on the sources' held-out rows: the tail average, accuracy %.2f %%\n",
                   100.0 * rep_sel.accuracy);
        else if (sflag)
            printf("selected on the sources' held-out rows: round %.0f, accuracy %.2f %%\n",
                   sel_round, 100.0 * rep_sel.accuracy);
    }
    /* Per-message parameter counts: this run, and the paper's Table II setting. */
    long N, mm;
    if (fk_params_int(&p, "N", 1000, 1, 1000000, &N, &err) ||
        fk_params_int(&p, "m", 100, 1, 1000000, &mm, &err)) {
        fk_sim_fail("sim fedrf-tca", "%s", err.msg);
        goto out;
    }
    size_t hid[4] = {100, 100}, paper_hidden[2] = {100, 100};
    int nh = 2;
    const char *hs = fk_params_str(&p, "hidden", "100,100");
    if (!strcmp(hs, "none"))
        nh = 0;
    else
        nh = sscanf(hs, "%zu,%zu,%zu,%zu", &hid[0], &hid[1], &hid[2], &hid[3]);
    fk_fedrf_counts k;
    fk_fedrf_message_params((size_t)N, (size_t)mm, hid, nh > 0 ? nh : 0,
                            (size_t)ds[0].n_classes, &k);
    print_counts(json, "this run", &k);
    fk_fedrf_message_params(1000, 800, paper_hidden, 2, 10, &k);
    print_counts(json, "paper Table II setting (N=1000, m=800, 100-100-10 classifier)", &k);
    rc = 0;
out:
    if (ds) {
        for (int i = 0; i < n_clients; i++)
            fk_dataset_close(&ds[i]);
        free(ds);
    }
    fk_params_close(&a);
    fk_params_close(&p);
    return rc;
}
