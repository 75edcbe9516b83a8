/* gRPC length-prefixed message framing (the body of a gRPC HTTP/2 stream):
 * each message is a 1-byte compressed flag, a 4-byte big-endian length and
 * the message bytes. The parser takes arbitrary slices (HTTP/2 DATA frames
 * split messages anywhere) and hands each complete message to a callback.
 * It checks the announced length against the configured maximum BEFORE it
 * allocates anything, so an oversized message costs the receiver nothing and
 * the caller can answer RESOURCE_EXHAUSTED. */
#ifndef FK_GRPC_FRAME_H
#define FK_GRPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"

#define FK_GRPC_PREFIX_LEN 5

/* Receives one complete message and takes ownership of it (free() it) unless an
 * allocation hook supplied the buffer (then it was the caller's all along).
 * Return FK_OK to continue; any other code stops the feed and is returned. */
typedef int (*fk_grpc_frame_cb)(void *ctx, uint8_t *msg, size_t len);

/* Optional allocation hook: called once a prefix announcing len bytes has passed
 * the flag and max_size checks, before any byte of the message is stored. It may
 * refuse (return a code other than FK_OK: the feed stops and returns it) or set
 * *buf to room for all len bytes (the caller keeps owning it: the parser never
 * frees or grows it). One allocation of the exact size, no regrowth copies. */
typedef int (*fk_grpc_frame_alloc_cb)(void *ctx, size_t len, uint8_t **buf);

typedef struct fk_grpc_frame_parser {
    size_t max_size;                 /* largest message accepted */
    fk_grpc_frame_alloc_cb alloc;    /* NULL: the parser mallocs and grows */
    uint8_t hdr[FK_GRPC_PREFIX_LEN]; /* prefix being assembled */
    size_t hdr_len;
    uint8_t *msg;                    /* message being assembled (grows as bytes arrive) */
    size_t msg_len;                  /* announced length (also of a refused one) */
    size_t msg_have;
    size_t msg_cap;
    int failed;                      /* an error poisons the stream */
} fk_grpc_frame_parser;

void fk_grpc_frame_init(fk_grpc_frame_parser *p, size_t max_size);
void fk_grpc_frame_close(fk_grpc_frame_parser *p);
/* Use alloc for every following message (its ctx is the one given to feed). */
void fk_grpc_frame_set_alloc(fk_grpc_frame_parser *p, fk_grpc_frame_alloc_cb alloc);

/* Feed a slice of the stream. Returns FK_OK, FK_ELIMIT (a message announced
 * more than max_size bytes: answer RESOURCE_EXHAUSTED), FK_EFORMAT (compressed
 * flag set; we never negotiate grpc-encoding), FK_ENOMEM, or the callback's
 * code. After an error every later feed fails with FK_ESTATE. */
FK_CHECKRETURN int fk_grpc_frame_feed(fk_grpc_frame_parser *p, const uint8_t *data, size_t len,
                                      fk_grpc_frame_cb cb, void *ctx, fk_err *err);

/* Non-zero while a message is half received, prefix or body (at end of stream
 * that is a truncated message: a protocol error). */
int fk_grpc_frame_partial(const fk_grpc_frame_parser *p);

/* Bytes held for the message in progress (for per-connection memory limits). */
size_t fk_grpc_frame_buffered(const fk_grpc_frame_parser *p);

/* Write the 5-byte prefix of an uncompressed message of len bytes.
 * Returns FK_OK, or FK_ELIMIT when len does not fit the 32-bit length. */
FK_CHECKRETURN int fk_grpc_frame_prefix(uint8_t out[FK_GRPC_PREFIX_LEN], size_t len, fk_err *err);

#endif
