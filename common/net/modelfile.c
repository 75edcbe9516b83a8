#include "common/net/modelfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/codec.h"
#include "fedkern.pb.h"

/* Model files larger than this are refused before reading (a model is at most a few GB of
 * doubles; a bigger file is not one). */
#define MAX_MODEL_FILE ((size_t)1 << 34)

int fk_modelfile_info_encode(const fk_model_info *info, uint8_t **buf, size_t *len, fk_err *err)
{
    fedkern_v1_ModelInfo m = fedkern_v1_ModelInfo_init_zero;
    snprintf(m.method, sizeof m.method, "%s", info->method);
    m.round = info->round > 0 ? (uint32_t)info->round : 0;
    snprintf(m.job_id, sizeof m.job_id, "%s", info->job_id);
    snprintf(m.software, sizeof m.software, "%s", info->software);
    return fk_codec_encode(fedkern_v1_ModelInfo_fields, &m, 0, buf, len, err);
}

int fk_modelfile_decode(const uint8_t *buf, size_t len, fk_bundle *model, fk_model_info *info,
                        fk_err *err)
{
    memset(info, 0, sizeof *info);
    int rc = fk_codec_bundle_decode(buf, len, model, err);
    if (rc)
        return fk_err_prefix(err, rc, "not a model file: ");
    fedkern_v1_ModelInfo m; /* the same bytes again: every field but the info is skipped */
    rc = fk_codec_decode(fedkern_v1_ModelInfo_fields, &m, buf, len, err);
    if (rc)
        return fk_err_prefix(err, rc, "not a model file (its info): ");
    snprintf(info->method, sizeof info->method, "%s", m.method);
    info->round = m.round > 0x7fffffff ? 0x7fffffff : (int)m.round;
    snprintf(info->job_id, sizeof info->job_id, "%s", m.job_id);
    snprintf(info->software, sizeof info->software, "%s", m.software);
    fk_codec_release(fedkern_v1_ModelInfo_fields, &m);
    return FK_OK;
}

int fk_modelfile_read(const char *path, fk_bundle *model, fk_model_info *info, fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fk_err_set(err, FK_EIO, "cannot open model file %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = FK_OK;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 65536;
            uint8_t *g = ncap <= MAX_MODEL_FILE ? realloc(buf, ncap) : NULL;
            if (!g) {
                rc = fk_err_set(err, ncap <= MAX_MODEL_FILE ? FK_ENOMEM : FK_EFORMAT,
                                "model file %s: too large to read", path);
                break;
            }
            buf = g;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = fk_err_set(err, FK_EIO, "cannot read model file %s", path);
            break;
        }
    }
    fclose(f);
    if (!rc) {
        rc = fk_modelfile_decode(buf, len, model, info, err);
        if (rc)
            fk_err_prefix(err, rc, "%s: ", path);
    }
    free(buf);
    return rc;
}

int fk_modelfile_write(const char *path, const fk_bundle *model, const fk_model_info *info,
                       fk_err *err)
{
    uint8_t *body = NULL, *tail = NULL;
    size_t body_len = 0, tail_len = 0;
    int rc = fk_codec_bundle_encode(model, &body, &body_len, err);
    if (!rc)
        rc = fk_modelfile_info_encode(info, &tail, &tail_len, err);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = rc ? NULL : fopen(tmp, "wb");
    if (!rc && !f)
        rc = fk_err_set(err, FK_EIO, "cannot write %s: %s", tmp, strerror(errno));
    if (f) {
        int bad = body_len && fwrite(body, 1, body_len, f) != body_len;
        bad |= tail_len && fwrite(tail, 1, tail_len, f) != tail_len;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path))
            rc = fk_err_set(err, FK_EIO, "cannot write the model file %s: %s", path,
                            strerror(errno));
    }
    free(body);
    free(tail);
    return rc;
}
