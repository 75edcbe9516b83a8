#include "common/net/chunk.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/net/codec.h"

int fk_sha256(const uint8_t *data, size_t len, uint8_t out[32], fk_err *err)
{
    unsigned int n = 0;
    if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != 32)
        return fk_err_set(err, FK_ENOMEM, "sha256: OpenSSL EVP_Digest failed");
    return FK_OK;
}

size_t fk_chunk_data_max(size_t max_message_size, size_t extra)
{
    if (extra > SIZE_MAX - FK_CHUNK_OVERHEAD || max_message_size <= extra + FK_CHUNK_OVERHEAD)
        return 0;
    size_t n = max_message_size - extra - FK_CHUNK_OVERHEAD;
    return n > UINT32_MAX ? UINT32_MAX : n;
}

/* Cut len bytes into chunks of chunk_size: shared by both sources. */
FK_CHECKRETURN static int plan(fk_chunker *c, uint64_t len, size_t chunk_size, fk_err *err)
{
    if (len == 0 || chunk_size == 0 || chunk_size > UINT32_MAX)
        return fk_err_set(err, FK_EINVAL, "chunker: empty payload or chunk size %zu out of range",
                          chunk_size);
    uint64_t total = len / chunk_size + (len % chunk_size != 0);
    if (total > UINT32_MAX)
        return fk_err_set(err, FK_ELIMIT, "chunker: %llu bytes need too many chunks of %zu",
                          (unsigned long long)len, chunk_size);
    c->len = len;
    c->chunk_size = (uint32_t)chunk_size;
    c->total = (uint32_t)total;
    return FK_OK;
}

int fk_chunker_init(fk_chunker *c, const uint8_t *payload, size_t len, size_t chunk_size,
                    fk_err *err)
{
    memset(c, 0, sizeof *c);
    int rc = plan(c, len, chunk_size, err);
    if (rc != FK_OK)
        return rc;
    c->payload = payload;
    return fk_sha256(payload, len, c->sha256, err);
}

typedef struct digest_sink {
    EVP_MD_CTX *md;
    uint64_t len;
} digest_sink;

static int digest_write(void *ctx, const uint8_t *data, size_t len)
{
    digest_sink *d = ctx;
    d->len += len;
    return data && EVP_DigestUpdate(d->md, data, len) ? FK_OK : FK_EINVAL;
}

int fk_chunker_init_bundle(fk_chunker *c, const fk_bundle *b, int dtype, size_t chunk_size,
                           fk_err *err)
{
    memset(c, 0, sizeof *c);
    digest_sink d = {EVP_MD_CTX_new(), 0};
    if (!d.md || !EVP_DigestInit_ex(d.md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(d.md);
        return fk_err_set(err, FK_ENOMEM, "chunker: OpenSSL digest setup failed");
    }
    int rc = fk_codec_bundle_stream(b, dtype, 0, UINT64_MAX, digest_write, &d, err);
    unsigned int n = 0;
    if (rc == FK_OK && (!EVP_DigestFinal_ex(d.md, c->sha256, &n) || n != 32))
        rc = fk_err_set(err, FK_ENOMEM, "chunker: OpenSSL digest failed");
    EVP_MD_CTX_free(d.md);
    if (rc == FK_OK)
        rc = plan(c, d.len, chunk_size, err);
    c->bundle = b;
    c->dtype = dtype;
    return rc;
}

/* Header of chunk index and where its bytes lie. */
static int locate(const fk_chunker *c, uint32_t index, fedkern_v1_Chunk *hdr, uint64_t *off,
                  size_t *len, fk_err *err)
{
    if (index >= c->total)
        return fk_err_set(err, FK_EINVAL, "chunker: chunk %u of %u does not exist", index,
                          c->total);
    *off = (uint64_t)index * c->chunk_size;
    *len = (size_t)(c->len - *off < c->chunk_size ? c->len - *off : c->chunk_size);
    *hdr = (fedkern_v1_Chunk)fedkern_v1_Chunk_init_zero;
    hdr->index = index;
    hdr->total = c->total;
    hdr->chunk_size = c->chunk_size;
    hdr->total_size = c->len;
    memcpy(hdr->sha256, c->sha256, 32);
    return FK_OK;
}

int fk_chunker_get(const fk_chunker *c, uint32_t index, fedkern_v1_Chunk *hdr,
                   const uint8_t **data, size_t *len, fk_err *err)
{
    if (!c->payload)
        return fk_err_set(err, FK_ESTATE, "chunker: a bundle chunker has no bytes to point at; "
                                          "use fk_chunker_read");
    uint64_t off = 0;
    int rc = locate(c, index, hdr, &off, len, err);
    if (rc == FK_OK)
        *data = c->payload + off;
    return rc;
}

typedef struct window_sink {
    uint8_t *out;
    uint64_t pos, off, len;
} window_sink;

/* Keep the part of each piece that falls inside [off, off + len). */
static int window_write(void *ctx, const uint8_t *data, size_t n)
{
    window_sink *w = ctx;
    uint64_t lo = w->pos > w->off ? w->pos : w->off;
    uint64_t hi = w->pos + n < w->off + w->len ? w->pos + n : w->off + w->len;
    if (lo < hi) {
        if (!data)
            return FK_ESTATE;
        memcpy(w->out + (lo - w->off), data + (lo - w->pos), (size_t)(hi - lo));
    }
    w->pos += n;
    return FK_OK;
}

int fk_chunker_read(const fk_chunker *c, uint32_t index, fedkern_v1_Chunk *hdr, uint8_t *buf,
                    size_t cap, size_t *len, fk_err *err)
{
    uint64_t off = 0;
    int rc = locate(c, index, hdr, &off, len, err);
    if (rc != FK_OK)
        return rc;
    if (cap < *len)
        return fk_err_set(err, FK_EINVAL, "chunker: buffer of %zu bytes for a %zu-byte chunk", cap,
                          *len);
    if (c->payload) {
        memcpy(buf, c->payload + off, *len);
        return FK_OK;
    }
    window_sink w = {buf, 0, off, *len};
    rc = fk_codec_bundle_stream(c->bundle, c->dtype, off, *len, window_write, &w, err);
    if (rc == FK_OK && w.pos != c->len)
        rc = fk_err_set(err, FK_ESTATE, "chunker: the bundle changed since the chunker was planned");
    return rc;
}

void fk_reasm_init(fk_reasm *r, size_t mem_limit)
{
    memset(r, 0, sizeof *r);
    r->mem_limit = mem_limit;
}

void fk_reasm_close(fk_reasm *r)
{
    for (uint32_t i = 0; r->parts && i < r->total; i++)
        free(r->parts[i]);
    free(r->parts);
    free(r->buf);
    free(r->have);
    fk_reasm_init(r, r->mem_limit);
}

size_t fk_reasm_held(const fk_reasm *r)
{
    return r->held;
}

static int has(const fk_reasm *r, uint32_t i)
{
    return r->have[i / 8] >> (i % 8) & 1;
}

/* First chunk: adopt its header, after the memory check of the payload it announces; only the
 * index is allocated now. */
FK_CHECKRETURN static int start(fk_reasm *r, const fedkern_v1_Chunk *hdr, fk_err *err)
{
    size_t bitmap = hdr->total / 8 + 1;
    size_t index = (size_t)hdr->total * sizeof *r->parts + bitmap;
    if (hdr->total_size > SIZE_MAX - index || hdr->total_size + index > r->mem_limit)
        return fk_err_set(err, FK_ELIMIT,
                          "chunked payload of %llu bytes in %u chunks exceeds the memory limit of "
                          "%zu bytes",
                          (unsigned long long)hdr->total_size, hdr->total, r->mem_limit);
    r->parts = calloc(hdr->total ? hdr->total : 1, sizeof *r->parts);
    r->have = calloc(bitmap, 1);
    if (!r->parts || !r->have) {
        fk_reasm_close(r);
        return fk_err_set(err, FK_ENOMEM, "chunk reassembly: out of memory for the index of %u "
                          "chunks", hdr->total);
    }
    r->started = 1;
    r->total = hdr->total;
    r->chunk_size = hdr->chunk_size;
    r->total_size = hdr->total_size;
    r->held = index;
    memcpy(r->sha256, hdr->sha256, 32);
    return FK_OK;
}

static int same_payload(const fk_reasm *r, const fedkern_v1_Chunk *hdr)
{
    return r->total == hdr->total && r->chunk_size == hdr->chunk_size &&
           r->total_size == hdr->total_size && !memcmp(r->sha256, hdr->sha256, 32);
}

/* All chunks in: put them together (each freed once copied), verify the hash, or drop
 * everything. */
FK_CHECKRETURN static int finish(fk_reasm *r, fk_err *err)
{
    r->buf = malloc(r->total_size ? (size_t)r->total_size : 1);
    if (!r->buf) {
        fk_reasm_close(r);
        return fk_err_set(err, FK_ENOMEM, "chunk reassembly: out of memory for %llu bytes",
                          (unsigned long long)r->total_size);
    }
    for (uint32_t i = 0; i < r->total; i++) {
        uint64_t off = (uint64_t)i * r->chunk_size;
        size_t n = (size_t)(r->total_size - off < r->chunk_size ? r->total_size - off
                                                                : r->chunk_size);
        memcpy(r->buf + off, r->parts[i], n);
        free(r->parts[i]);
        r->parts[i] = NULL;
    }
    uint8_t md[32];
    int rc = fk_sha256(r->buf, (size_t)r->total_size, md, err);
    if (rc != FK_OK)
        return rc;
    if (memcmp(md, r->sha256, 32)) {
        fk_reasm_close(r);
        return fk_err_set(err, FK_EFORMAT,
                          "chunked payload failed its SHA-256 check; it was dropped, resend it");
    }
    r->complete = 1;
    return FK_OK;
}

int fk_reasm_add(fk_reasm *r, const fedkern_v1_Chunk *hdr, const uint8_t *data, size_t len,
                 int *complete, fk_err *err)
{
    *complete = r->complete;
    int rc = fk_codec_chunk_check(hdr, len, err);
    if (rc != FK_OK)
        return rc;
    if (!r->started && (rc = start(r, hdr, err)) != FK_OK)
        return rc;
    if (!same_payload(r, hdr))
        return fk_err_set(err, FK_EFORMAT,
                          "chunk %u belongs to a different payload (total, sizes or sha256 differ)",
                          hdr->index);
    if (has(r, hdr->index)) { /* a resend: held alone, or in the whole payload once complete */
        const uint8_t *held = r->complete ? r->buf + (uint64_t)hdr->index * r->chunk_size
                                          : r->parts[hdr->index];
        if (memcmp(held, data, len))
            return fk_err_set(err, FK_EFORMAT, "chunk %u resent with different bytes",
                              hdr->index);
        return FK_OK;
    }
    uint8_t *part = malloc(len ? len : 1);
    if (!part)
        return fk_err_set(err, FK_ENOMEM, "chunk reassembly: out of memory for chunk %u",
                          hdr->index);
    memcpy(part, data, len);
    r->parts[hdr->index] = part;
    r->held += len;
    r->have[hdr->index / 8] |= (uint8_t)(1u << (hdr->index % 8));
    r->received++;
    if (r->received == r->total && (rc = finish(r, err)) != FK_OK)
        return rc;
    *complete = r->complete;
    return FK_OK;
}

size_t fk_reasm_missing(const fk_reasm *r, uint32_t *out, size_t max)
{
    if (!r->started)
        return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < r->total && r->received + n < r->total; i++) {
        if (has(r, i))
            continue;
        if (out && n < max)
            out[n] = i;
        n++;
    }
    return n;
}

int fk_reasm_take(fk_reasm *r, uint8_t **payload, size_t *len, fk_err *err)
{
    if (!r->complete)
        return fk_err_set(err, FK_ESTATE, "chunk reassembly: payload not complete yet");
    *payload = r->buf;
    *len = (size_t)r->total_size;
    r->buf = NULL;
    fk_reasm_close(r);
    return FK_OK;
}
