/* client/cstate.c: the state file's encoding, the atomic file operations, and a
 * method's client state through a file: a client rebuilt from the file steps
 * exactly as the one that wrote it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cstate.h"
#include "common/net/chunk.h"
#include "common/data/synth_gmm.h"
#include "common/methods/mixture/fedgrem.h"
#include "common/net/codec.h"

static void sample(fk_cstate *s)
{
    fk_cstate_init(s);
    s->job = 42;
    s->client = 3;
    s->round = 7;
    s->phase = 1;
    snprintf(s->task_id, sizeof s->task_id, "42.0");
    snprintf(s->update_id, sizeof s->update_id, "00112233445566778899aabbccddeeff");
    assert_int_equal(fk_cstate_digest("fedgrem", "method = fedgrem\n", s->digest, NULL), FK_OK);
    s->method = strdup("fedgrem");
    s->config = strdup("method = fedgrem\n");
    assert_true(s->method && s->config);
    double rep[5] = {57, 1.25, 0.5, 0.125, 0.01};
    memcpy(s->report, rep, sizeof rep);
    double v[3] = {1, -2, 3.5};
    assert_int_equal(fk_bundle_put_vec(&s->state, "W", 3, v), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&s->state, "fitted", 1), FK_OK);
    fk_bundle up;
    fk_bundle_init(&up);
    assert_int_equal(fk_bundle_put_vec(&up, "theta", 3, v), FK_OK);
    assert_int_equal(fk_codec_bundle_encode(&up, &s->update, &s->update_len, NULL), FK_OK);
    fk_bundle_close(&up);
}

static void same(const fk_cstate *a, const fk_cstate *b)
{
    assert_int_equal(a->job, b->job);
    assert_int_equal(a->client, b->client);
    assert_int_equal(a->round, b->round);
    assert_int_equal(a->phase, b->phase);
    assert_string_equal(a->task_id, b->task_id);
    assert_string_equal(a->update_id, b->update_id);
    assert_memory_equal(a->digest, b->digest, 32);
    assert_true(!a->method == !b->method && !a->config == !b->config);
    if (a->method) {
        assert_string_equal(a->method, b->method);
        assert_string_equal(a->config, b->config);
    }
    assert_memory_equal(a->report, b->report, sizeof a->report);
    assert_int_equal(a->update_len, b->update_len);
    assert_memory_equal(a->update, b->update, a->update_len);
    assert_int_equal(a->state.count, b->state.count);
    for (size_t i = 0; i < a->state.count; i++) {
        assert_string_equal(a->state.items[i].name, b->state.items[i].name);
        assert_int_equal(a->state.items[i].len, b->state.items[i].len);
        assert_memory_equal(a->state.items[i].data, b->state.items[i].data,
                            a->state.items[i].len * sizeof(double));
    }
}

static void encode_decode_round_trip(void **st)
{
    (void)st;
    fk_cstate a, b;
    sample(&a);
    fk_cstate_init(&b);
    uint8_t *buf;
    size_t len;
    assert_int_equal(fk_cstate_encode(&a, &buf, &len, NULL), FK_OK);
    assert_int_equal(fk_cstate_decode(buf, len, &b, NULL), FK_OK);
    same(&a, &b);
    /* every truncation and every single flipped byte is refused, b left as it was */
    fk_err err;
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(fk_cstate_decode(buf, cut, &b, &err), FK_EFORMAT);
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x20;
        assert_int_not_equal(fk_cstate_decode(buf, len, &b, &err), FK_OK);
        buf[i] ^= 0x20;
    }
    same(&a, &b);
    free(buf);
    /* no pending update is a valid file too */
    free(a.update);
    a.update = NULL;
    a.update_len = 0;
    a.update_id[0] = '\0';
    assert_int_equal(fk_cstate_encode(&a, &buf, &len, NULL), FK_OK);
    assert_int_equal(fk_cstate_decode(buf, len, &b, NULL), FK_OK);
    same(&a, &b);
    free(buf);
    fk_cstate_close(&a);
    fk_cstate_close(&b);
}

/* Version-1 files (no method and config) are still read; a version-2 file whose method and
 * config are not the job its digest names is refused; a file without them is valid. */
static void version1_and_job_names(void **st)
{
    (void)st;
    fk_cstate a, b;
    sample(&a);
    fk_cstate_init(&b);
    free(a.method);
    free(a.config);
    a.method = a.config = NULL;
    uint8_t *buf;
    size_t len;
    assert_int_equal(fk_cstate_encode(&a, &buf, &len, NULL), FK_OK);
    assert_int_equal(fk_cstate_decode(buf, len, &b, NULL), FK_OK);
    same(&a, &b);
    assert_null(b.method);
    /* the same file as version 1: version 1, the two zero lengths out, a new checksum */
    size_t head1 = 8 + 4 + 8 + 12 + 2 * FK_CSTATE_ID_MAX + 32 + 40 + 16;
    uint8_t *v1 = malloc(len - 8);
    assert_non_null(v1);
    memcpy(v1, buf, head1);
    memcpy(v1 + head1, buf + head1 + 8, len - head1 - 8 - 32);
    v1[8] = 1;
    assert_int_equal(fk_sha256(v1, len - 8 - 32, v1 + len - 8 - 32, NULL), FK_OK);
    fk_cstate_close(&b);
    fk_cstate_init(&b);
    assert_int_equal(fk_cstate_decode(v1, len - 8, &b, NULL), FK_OK);
    same(&a, &b);
    free(v1);
    free(buf);
    /* a config that is not the digest's job */
    a.method = strdup("fedgrem");
    a.config = strdup("method = fedgrem\nseed = 2\n");
    assert_int_equal(fk_cstate_encode(&a, &buf, &len, NULL), FK_OK);
    fk_err err;
    assert_int_equal(fk_cstate_decode(buf, len, &b, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "digest"));
    free(buf);
    fk_cstate_close(&a);
    fk_cstate_close(&b);
}

static void files_write_read_list_remove(void **st)
{
    (void)st;
    char dir[] = "/tmp/fk-cstate-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fk_cstate a, b;
    sample(&a);
    fk_cstate_init(&b);
    fk_err err;
    assert_int_equal(fk_cstate_read(dir, a.job, &b, &err), FK_ENOTFOUND);
    assert_int_equal(fk_cstate_write(dir, &a, NULL), FK_OK);
    a.round = 8; /* a second write replaces the first */
    assert_int_equal(fk_cstate_write(dir, &a, NULL), FK_OK);
    assert_int_equal(fk_cstate_read(dir, a.job, &b, NULL), FK_OK);
    same(&a, &b);
    char path[4096], tmp[4200];
    assert_int_equal(fk_cstate_path(path, sizeof path, dir, a.job, NULL), FK_OK);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0); /* no temp file left behind */
    int64_t *ids;
    int n;
    assert_int_equal(fk_cstate_list(dir, &ids, &n, NULL), FK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 42);
    free(ids);
    /* a damaged file is reported as such */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    fputc('x', f);
    fclose(f);
    assert_int_equal(fk_cstate_read(dir, a.job, &b, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "checksum"));
    assert_int_equal(fk_cstate_remove(dir, a.job, NULL), FK_OK);
    assert_int_equal(fk_cstate_remove(dir, a.job, NULL), FK_OK);
    assert_int_equal(fk_cstate_read(dir, a.job, &b, &err), FK_ENOTFOUND);
    assert_int_equal(fk_cstate_list(dir, &ids, &n, NULL), FK_OK);
    assert_int_equal(n, 0);
    free(ids);
    fk_cstate_close(&a);
    fk_cstate_close(&b);
    assert_int_equal(rmdir(dir), 0);
}

/* Step a FedGrEM client through local fit and alignment, save it through a
 * file, load it into a fresh client: both give the same next updates. */
static void fedgrem_state_through_a_file(void **st)
{
    (void)st;
    fk_dataset tasks[10];
    double th[500], w[50];
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    assert_int_equal(fk_synth_gmm_make(&o, 5, tasks, th, w, NULL), FK_OK);
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "restarts", "2"), FK_OK);
    assert_int_equal(fk_params_set(&p, "align_B", "4"), FK_OK);
    const fk_method *m = &fk_method_fedgrem;
    void *srv, *cli[10];
    assert_int_equal(m->server_init(&srv, &p, 10, 77, NULL), FK_OK);
    for (int k = 0; k < 10; k++)
        assert_int_equal(m->client_init(&cli[k], &p, &tasks[k], k, 10, 77, NULL), FK_OK);
    fk_bundle task;
    fk_bundle_init(&task);
    fk_update ups[10];
    for (int round = 1; round <= 3; round++) {
        int done = 0;
        for (int phase = 0; !done; phase++) {
            for (int k = 0; k < 10; k++) {
                fk_bundle_clear(&task);
                assert_int_equal(m->task(srv, round, phase, k, &task, NULL), FK_OK);
                fk_bundle_init(&ups[k].msg);
                fk_report_init(&ups[k].report);
                ups[k].client = k;
                assert_int_equal(m->local_step(cli[k], &task, &ups[k].msg, &ups[k].report, NULL),
                                 FK_OK);
            }
            assert_int_equal(m->aggregate(srv, round, phase, ups, 10, &done, NULL), FK_OK);
            for (int k = 0; k < 10; k++)
                fk_bundle_close(&ups[k].msg);
        }
    }
    /* client 4 goes through a state file into a fresh client */
    char dir[] = "/tmp/fk-cstate-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fk_cstate s, r;
    fk_cstate_init(&s);
    fk_cstate_init(&r);
    s.job = 1;
    s.client = 4;
    assert_int_equal(m->client_save(cli[4], &s.state, NULL), FK_OK);
    assert_int_equal(fk_cstate_write(dir, &s, NULL), FK_OK);
    assert_int_equal(fk_cstate_read(dir, 1, &r, NULL), FK_OK);
    void *fresh, *lost;
    assert_int_equal(m->client_init(&fresh, &p, &tasks[4], 4, 10, 77, NULL), FK_OK);
    assert_int_equal(m->client_init(&lost, &p, &tasks[4], 4, 10, 77, NULL), FK_OK);
    assert_int_equal(m->client_load(fresh, &r.state, NULL), FK_OK);
    fk_bundle a, b;
    for (int round = 4; round <= 5; round++) {
        fk_bundle_clear(&task);
        assert_int_equal(m->task(srv, round, 0, 4, &task, NULL), FK_OK);
        fk_bundle_init(&a);
        fk_bundle_init(&b);
        fk_report ra, rb;
        fk_report_init(&ra);
        fk_report_init(&rb);
        assert_int_equal(m->local_step(cli[4], &task, &a, &ra, NULL), FK_OK);
        assert_int_equal(m->local_step(fresh, &task, &b, &rb, NULL), FK_OK);
        const fk_tensor *ta = fk_bundle_get(&a, "theta"), *tb = fk_bundle_get(&b, "theta");
        assert_non_null(ta);
        assert_non_null(tb);
        assert_int_equal(ta->len, tb->len);
        assert_memory_equal(ta->data, tb->data, ta->len * sizeof(double));
        assert_memory_equal(fk_bundle_get(&a, "w")->data, fk_bundle_get(&b, "w")->data,
                            fk_bundle_get(&a, "w")->len * sizeof(double));
        fk_bundle_close(&a);
        fk_bundle_close(&b);
    }
    /* without the file the client cannot step: the error the agent reports */
    fk_bundle_clear(&task);
    assert_int_equal(m->task(srv, 6, 0, 4, &task, NULL), FK_OK);
    fk_bundle_init(&a);
    fk_report ra;
    fk_report_init(&ra);
    fk_err err;
    assert_int_equal(m->local_step(lost, &task, &a, &ra, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "before its initialisation"));
    fk_bundle_close(&a);
    assert_int_equal(fk_cstate_remove(dir, 1, NULL), FK_OK);
    assert_int_equal(rmdir(dir), 0);
    fk_cstate_close(&s);
    fk_cstate_close(&r);
    m->client_close(fresh);
    m->client_close(lost);
    for (int k = 0; k < 10; k++) {
        m->client_close(cli[k]);
        fk_dataset_close(&tasks[k]);
    }
    m->server_close(srv);
    fk_bundle_close(&task);
    fk_params_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encode_decode_round_trip),
        cmocka_unit_test(version1_and_job_names),
        cmocka_unit_test(files_write_read_list_remove),
        cmocka_unit_test(fedgrem_state_through_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
