/* Payloads larger than the maximum message size travel as chunks: pieces of
 * equal size (the last may be shorter), each carrying index, total,
 * chunk_size, total_size and the SHA-256 of the whole payload. The sender
 * plans and slices (no copies); the receiver reassembles chunks in any order,
 * treats a resent chunk as a no-op, reports what is missing (so a client
 * resumes a half-sent update after a reconnect), enforces a memory limit
 * before allocating, and verifies the SHA-256 before handing the payload out. */
#ifndef FK_CHUNK_H
#define FK_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "fedkern.pb.h"

/* Bytes of each message kept free for the fields around the chunk (ids,
 * round, report, chunk header); callers add the size of any free text they
 * send alongside (e.g. PullTaskResponse.params). */
#define FK_CHUNK_OVERHEAD 4096

/* Sender side: a payload cut into chunks. Holds a pointer, not a copy:
 * either to encoded bytes, or to a bundle whose encoding is produced one
 * chunk at a time (so a large model is never held encoded as a whole). */
typedef struct fk_chunker {
    const uint8_t *payload;  /* encoded bytes, or NULL */
    const fk_bundle *bundle; /* or the bundle to encode on demand */
    int dtype;
    uint64_t len;
    uint32_t chunk_size;
    uint32_t total;
    uint8_t sha256[32];
} fk_chunker;

/* Largest chunk data that fits a message of max_message_size bytes whose
 * other fields take at most extra + FK_CHUNK_OVERHEAD bytes (0 if none fits). */
size_t fk_chunk_data_max(size_t max_message_size, size_t extra);

/* Plan chunks of chunk_size bytes for payload[0..len) and hash it.
 * len must be >= 1 and need at most UINT32_MAX chunks. */
FK_CHECKRETURN int fk_chunker_init(fk_chunker *c, const uint8_t *payload, size_t len,
                                   size_t chunk_size, fk_err *err);
/* Plan chunks of the encoding of b as dtype: one streaming pass computes its
 * size and SHA-256 without building it. b must not change while in use. */
FK_CHECKRETURN int fk_chunker_init_bundle(fk_chunker *c, const fk_bundle *b, int dtype,
                                          size_t chunk_size, fk_err *err);
/* Header and data slice of chunk index (data points into the payload;
 * encoded-bytes chunkers only). */
FK_CHECKRETURN int fk_chunker_get(const fk_chunker *c, uint32_t index, fedkern_v1_Chunk *hdr,
                                  const uint8_t **data, size_t *len, fk_err *err);
/* Header and a copy of chunk index in buf (cap >= chunk_size); any chunker. */
FK_CHECKRETURN int fk_chunker_read(const fk_chunker *c, uint32_t index, fedkern_v1_Chunk *hdr,
                                   uint8_t *buf, size_t cap, size_t *len, fk_err *err);

/* Receiver side. */
/* Memory grows with the chunks that arrived (issue 33): each is held in its own buffer until
 * the last one is in; only then is the payload put together (total_size bytes, the chunks freed
 * as they are copied). A header announcing a large payload costs its index (a pointer and a bit
 * per chunk), not total_size. */
typedef struct fk_reasm {
    size_t mem_limit; /* most bytes this reassembly may hold (payload and index) */
    int started;
    uint32_t total;
    uint32_t chunk_size;
    uint64_t total_size;
    uint8_t sha256[32];
    uint8_t **parts;  /* total entries: chunk i's bytes, NULL until it arrived */
    uint8_t *buf;     /* total_size bytes, once complete */
    uint8_t *have;    /* one bit per chunk */
    uint32_t received;
    size_t held;      /* bytes held now: the chunks received and the index */
    int complete;     /* all chunks in and the hash verified */
} fk_reasm;

void fk_reasm_init(fk_reasm *r, size_t mem_limit);
void fk_reasm_close(fk_reasm *r);
/* Add one chunk (hdr as decoded, data of len bytes). *complete becomes 1 once
 * every chunk is in and the SHA-256 matched. A chunk already held is
 * accepted again without change (idempotent resend) if its bytes are the
 * same. Errors: FK_ELIMIT (total_size over mem_limit, checked before
 * allocating), FK_EFORMAT (header inconsistent with itself or with earlier
 * chunks, a resent chunk with different bytes, or a SHA-256 mismatch at the
 * end -- then the reassembly is reset and the sender must start again). */
FK_CHECKRETURN int fk_reasm_add(fk_reasm *r, const fedkern_v1_Chunk *hdr, const uint8_t *data,
                                size_t len, int *complete, fk_err *err);
/* Indices still missing, ascending: writes up to max of them to out (out
 * may be NULL) and returns how many are missing in all. Before the first
 * chunk nothing is known and 0 is returned. */
size_t fk_reasm_missing(const fk_reasm *r, uint32_t *out, size_t max);
/* Bytes the reassembly holds now (chunks received, index): what a receiver counts against
 * its per-sender and global caps. */
size_t fk_reasm_held(const fk_reasm *r);
/* Hand the verified payload to the caller (free() it) and reset. */
FK_CHECKRETURN int fk_reasm_take(fk_reasm *r, uint8_t **payload, size_t *len, fk_err *err);

/* SHA-256 of data[0..len) through OpenSSL EVP. */
FK_CHECKRETURN int fk_sha256(const uint8_t *data, size_t len, uint8_t out[32], fk_err *err);

#endif
