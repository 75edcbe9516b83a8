#include "common/net/grpc.h"

#include <stdio.h>
#include <string.h>

const char *fk_grpc_status_name(int s)
{
    static const char *names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                  "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                  "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                  "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
    return s >= 0 && s <= 16 ? names[s] : "UNKNOWN";
}

int fk_grpc_timeout_parse(const char *v, size_t len, uint64_t *ms)
{
    if (len < 2 || len > 9)
        return -1;
    uint64_t n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    switch (v[len - 1]) {
    case 'H': *ms = n * 3600000u; break;
    case 'M': *ms = n * 60000u; break;
    case 'S': *ms = n * 1000u; break;
    case 'm': *ms = n; break;
    case 'u': *ms = (n + 999u) / 1000u; break;
    case 'n': *ms = (n + 999999u) / 1000000u; break;
    default: return -1;
    }
    return 0;
}

void fk_grpc_timeout_format(uint64_t ms, char *out, size_t cap)
{
    if (ms <= 99999999u)
        snprintf(out, cap, "%llum", (unsigned long long)ms);
    else if (ms / 1000u <= 99999999u)
        snprintf(out, cap, "%lluS", (unsigned long long)(ms / 1000u));
    else if (ms / 60000u <= 99999999u)
        snprintf(out, cap, "%lluM", (unsigned long long)(ms / 60000u));
    else
        snprintf(out, cap, "%lluH", (unsigned long long)(ms / 3600000u > 99999999u ? 99999999u
                                                                             : ms / 3600000u));
}

size_t fk_grpc_message_encode(const char *msg, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            if (o + 1 >= cap)
                break;
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= cap)
                break;
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    /* HTTP/2 field values may not end in whitespace (the peer resets the stream with
     * PROTOCOL_ERROR): a message cut at the cap after a space loses the space. */
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
    return o;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t fk_grpc_message_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < len && (hi = hexval(in[i + 1])) >= 0 &&
            (lo = hexval(in[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = '\0';
    return o;
}

void fk_grpc_prefix_encode(uint8_t out[5], uint32_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}
