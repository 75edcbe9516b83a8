/* Fuzz target: fedkern-faultproxy rule scripts (deploy/faultproxy/rules.c),
 * read from disk by --script. Every accepted rule must be in range. */
#include <stdint.h>
#include <stdlib.h>

#include "deploy/faultproxy/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fk_fault rules[FK_FAULT_MAX_RULES];
    fk_fault dflt = {0};
    int n = 0;
    fk_err err;
    if (fk_fault_parse_script((const char *)data, size, &dflt, rules, FK_FAULT_MAX_RULES, &n,
                              "fuzz", &err) == FK_OK) {
        if (n < 1 || n > FK_FAULT_MAX_RULES)
            abort();
        for (int i = 0; i < n; i++)
            if (!(rules[i].drop >= 0 && rules[i].drop <= 1) ||
                !(rules[i].corrupt >= 0 && rules[i].corrupt <= 1) || !(rules[i].latency_ms >= 0) ||
                !(rules[i].jitter_ms >= 0) || !(rules[i].rate >= 0))
                abort();
    }
    return 0;
}
