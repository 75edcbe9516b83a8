/* Fuzz target: the client state file decoder (client/cstate.c), bytes a
 * restarted fedkern-client reads back from its state directory. The input is
 * decoded as it is, then once more with its trailing checksum made right, so
 * mutations reach the header and bundle checks behind the checksum. A decoded
 * file must re-encode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/cstate.h"
#include "common/net/chunk.h"

static void one(const uint8_t *data, size_t size)
{
    fk_cstate s;
    fk_err err;
    fk_cstate_init(&s);
    if (fk_cstate_decode(data, size, &s, &err) == FK_OK) {
        uint8_t *buf;
        size_t len;
        if (fk_cstate_encode(&s, &buf, &len, &err) != FK_OK)
            abort();
        fk_cstate t;
        fk_cstate_init(&t);
        if (fk_cstate_decode(buf, len, &t, &err) != FK_OK || t.job != s.job ||
            t.update_len != s.update_len || t.state.count != s.state.count ||
            strcmp(t.task_id, s.task_id) || strcmp(t.update_id, s.update_id))
            abort();
        fk_cstate_close(&t);
        free(buf);
    }
    fk_cstate_close(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    if (size < 32)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    fk_err err;
    if (fk_sha256(fixed, size - 32, fixed + size - 32, &err) == FK_OK)
        one(fixed, size);
    free(fixed);
    return 0;
}
