/* gRPC-over-HTTP/2 vocabulary shared by server and client: status codes,
 * grpc-timeout values and grpc-message percent-encoding. */
#ifndef FK_NET_GRPC_H
#define FK_NET_GRPC_H

#include <stddef.h>
#include <stdint.h>

enum fk_grpc_status {
    FK_GRPC_OK = 0,
    FK_GRPC_CANCELLED = 1,
    FK_GRPC_UNKNOWN = 2,
    FK_GRPC_INVALID_ARGUMENT = 3,
    FK_GRPC_DEADLINE_EXCEEDED = 4,
    FK_GRPC_NOT_FOUND = 5,
    FK_GRPC_ALREADY_EXISTS = 6,
    FK_GRPC_PERMISSION_DENIED = 7,
    FK_GRPC_RESOURCE_EXHAUSTED = 8,
    FK_GRPC_FAILED_PRECONDITION = 9,
    FK_GRPC_ABORTED = 10,
    FK_GRPC_OUT_OF_RANGE = 11,
    FK_GRPC_UNIMPLEMENTED = 12,
    FK_GRPC_INTERNAL = 13,
    FK_GRPC_UNAVAILABLE = 14,
    FK_GRPC_DATA_LOSS = 15,
    FK_GRPC_UNAUTHENTICATED = 16,
    FK_GRPC_N_STATUS = 17 /* count of the codes above */
};

/* "DEADLINE_EXCEEDED" etc.; "UNKNOWN" for codes outside 0..16. */
const char *fk_grpc_status_name(int status);

/* Parse a grpc-timeout header value ("100m", "5S", "1H": at most 8 digits and one
 * unit of H M S m u n) into milliseconds, rounding sub-millisecond values up.
 * Returns 0 on success, -1 when malformed. */
int fk_grpc_timeout_parse(const char *value, size_t len, uint64_t *ms);

/* Format ms as a grpc-timeout value (<= 8 digits, unit chosen to fit); out >= 16 bytes. */
void fk_grpc_timeout_format(uint64_t ms, char *out, size_t cap);

/* Percent-encode a grpc-message (bytes outside 0x20..0x7e and '%' become %XX).
 * Writes at most cap-1 bytes plus NUL, truncating on a whole escape. Returns the length. */
size_t fk_grpc_message_encode(const char *msg, char *out, size_t cap);

/* Decode %XX escapes (invalid escapes are kept verbatim, as the spec asks). */
size_t fk_grpc_message_decode(const char *in, size_t len, char *out, size_t cap);

/* The 5-byte gRPC message prefix: compressed flag + big-endian length. */
void fk_grpc_prefix_encode(uint8_t out[5], uint32_t len);

#endif
