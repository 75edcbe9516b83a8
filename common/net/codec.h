/* fk_bundle <-> protobuf (fedkern.v1.Bundle / Tensor) and the Federation
 * messages that carry bundles. Tensor bytes go through nanopb callbacks:
 * encoding writes straight from the bundle's doubles (converted in small
 * blocks for float32), decoding writes straight into the bundle's storage, so
 * a model is never held twice. An encoded Bundle is also the on-disk format
 * of models and checkpoints, hence the strict decoder: names 1..47 printable
 * bytes and unique, at most FK_TENSOR_MAX_DIMS dims, a known dtype, and
 * len(data) == product(shape) * sizeof(dtype) exactly. */
#ifndef FK_CODEC_H
#define FK_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <pb.h>

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "fedkern.pb.h"

/* Wire dtypes (values of fedkern.v1.DType). */
#define FK_DTYPE_F64 fedkern_v1_DType_DTYPE_FLOAT64
#define FK_DTYPE_F32 fedkern_v1_DType_DTYPE_FLOAT32

/* Most tensors a decoded bundle may hold (keeps duplicate checks cheap). */
#define FK_CODEC_MAX_TENSORS 4096

/* A NUL byte inside string field `field` of the encoded message buf (nanopb's C strings would
 * end there and drop the rest silently): 1 with *line (1-based, counted in the string) and
 * *at (byte offset in the string) of the first one, 0 when there is none or buf does not
 * parse (the decoder reports that). */
int fk_codec_string_nul(const uint8_t *buf, size_t len, uint32_t field, int *line, size_t *at);

/* ---- bundles on their own (disk format, chunked payloads) ---- */

/* Encoded size of b with tensors sent as dtype. */
FK_CHECKRETURN int fk_codec_bundle_size(const fk_bundle *b, int dtype, size_t *len, fk_err *err);
/* Encode b (float64 on the wire) into a new malloc'd buffer. */
FK_CHECKRETURN int fk_codec_bundle_encode(const fk_bundle *b, uint8_t **buf, size_t *len,
                                          fk_err *err);
/* Same with a chosen wire dtype (FK_DTYPE_F32 halves the bytes, rounds values). */
FK_CHECKRETURN int fk_codec_bundle_encode_as(const fk_bundle *b, int dtype, uint8_t **buf,
                                             size_t *len, fk_err *err);
/* Decode into out, which must be empty (fk_bundle_init); on error out is
 * left empty and err says what is wrong and where. */
FK_CHECKRETURN int fk_codec_bundle_decode(const uint8_t *buf, size_t len, fk_bundle *out,
                                          fk_err *err);

/* Receives the encoding piece by piece, in order. data is NULL for bytes
 * outside the kept window (their content was skipped, not computed). */
typedef int (*fk_codec_sink)(void *ctx, const uint8_t *data, size_t len);
/* Stream the encoding of b (as dtype) to sink without building it. Only bytes
 * in [keep_off, keep_off + keep_len) are guaranteed non-NULL, so cutting one
 * chunk out of a large model costs no conversion outside the chunk. */
FK_CHECKRETURN int fk_codec_bundle_stream(const fk_bundle *b, int dtype, uint64_t keep_off,
                                          uint64_t keep_len, fk_codec_sink sink, void *ctx,
                                          fk_err *err);

/* ---- any nanopb message ---- */

/* Encode msg into a new malloc'd buffer. With framed != 0 the buffer starts
 * with the 5-byte gRPC message prefix (ready to send, no second copy). */
FK_CHECKRETURN int fk_codec_encode(const pb_msgdesc_t *fields, const void *msg, int framed,
                                   uint8_t **buf, size_t *len, fk_err *err);
/* Decode buf into msg (overwritten). Free with fk_codec_release. */
FK_CHECKRETURN int fk_codec_decode(const pb_msgdesc_t *fields, void *msg, const uint8_t *buf,
                                   size_t len, fk_err *err);
/* Free what decoding malloc'd inside msg (FT_POINTER strings and arrays). */
void fk_codec_release(const pb_msgdesc_t *fields, void *msg);

/* ---- messages that carry a payload (an inline bundle or one chunk) ---- */

/* What to send: an inline bundle, or the data of msg.chunk (the caller fills
 * the chunk's index/total/chunk_size/total_size/sha256, see chunk.h). */
typedef struct fk_codec_tx {
    const fk_bundle *bundle; /* inline bundle, or NULL */
    int dtype;               /* FK_DTYPE_F64 (0 means F64) or FK_DTYPE_F32 */
    const uint8_t *chunk_data; /* non-NULL: send a chunk with these bytes */
    size_t chunk_len;
} fk_codec_tx;

/* Where received payloads go. bundle: an empty caller-owned bundle that
 * receives an inline bundle. chunk_data/chunk_len: after decoding a message
 * with a chunk they point INTO the decoded buffer (no copy; valid while that
 * buffer lives). has_bundle/has_chunk tell which one came. */
typedef struct fk_codec_rx {
    fk_bundle *bundle;
    int has_bundle;
    int has_chunk;
    const uint8_t *chunk_data;
    size_t chunk_len;
} fk_codec_rx;

/* The three payload messages. Encoders set has_bundle/has_chunk in msg from
 * tx; decoders check that at most one payload came, that a chunk is
 * well-formed (index < total, 32-byte sha256, sizes consistent) and release
 * nothing on success: call fk_codec_release on the message afterwards. */
FK_CHECKRETURN int fk_codec_encode_pull_task_response(fedkern_v1_PullTaskResponse *msg,
                                                      const fk_codec_tx *tx, int framed,
                                                      uint8_t **buf, size_t *len, fk_err *err);
FK_CHECKRETURN int fk_codec_decode_pull_task_response(const uint8_t *buf, size_t len,
                                                      fedkern_v1_PullTaskResponse *msg,
                                                      fk_codec_rx *rx, fk_err *err);
FK_CHECKRETURN int fk_codec_encode_push_update_request(fedkern_v1_PushUpdateRequest *msg,
                                                       const fk_codec_tx *tx, int framed,
                                                       uint8_t **buf, size_t *len, fk_err *err);
FK_CHECKRETURN int fk_codec_decode_push_update_request(const uint8_t *buf, size_t len,
                                                       fedkern_v1_PushUpdateRequest *msg,
                                                       fk_codec_rx *rx, fk_err *err);
FK_CHECKRETURN int fk_codec_encode_job_result_response(fedkern_v1_JobResultResponse *msg,
                                                       const fk_codec_tx *tx, int framed,
                                                       uint8_t **buf, size_t *len, fk_err *err);
FK_CHECKRETURN int fk_codec_decode_job_result_response(const uint8_t *buf, size_t len,
                                                       fedkern_v1_JobResultResponse *msg,
                                                       fk_codec_rx *rx, fk_err *err);

/* Predict request and response: one inline bundle each (tx->chunk_data must be NULL). */
FK_CHECKRETURN int fk_codec_encode_predict_request(fedkern_v1_PredictRequest *msg,
                                                   const fk_codec_tx *tx, uint8_t **buf,
                                                   size_t *len, fk_err *err);
FK_CHECKRETURN int fk_codec_decode_predict_request(const uint8_t *buf, size_t len,
                                                   fedkern_v1_PredictRequest *msg,
                                                   fk_bundle *queries, fk_err *err);
FK_CHECKRETURN int fk_codec_encode_predict_response(fedkern_v1_PredictResponse *msg,
                                                    const fk_codec_tx *tx, uint8_t **buf,
                                                    size_t *len, fk_err *err);
FK_CHECKRETURN int fk_codec_decode_predict_response(const uint8_t *buf, size_t len,
                                     fedkern_v1_PredictResponse *msg, fk_bundle *result,
                                     fk_err *err);

/* Check a decoded chunk header against its data length (shared with chunk.c). */
FK_CHECKRETURN int fk_codec_chunk_check(const fedkern_v1_Chunk *c, size_t data_len, fk_err *err);

#endif
