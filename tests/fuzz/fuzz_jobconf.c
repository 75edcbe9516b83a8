/* Fuzz target: job configs as SubmitJob delivers them from the network
 * (common/methods/jobconf.c), and the task ids clients send back (server/service.c). */
#include <stdint.h>
#include <stdlib.h>

#include "common/methods/jobconf.h"
#include "server/service.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    fk_jobconf c;
    fk_err err;
    if (fk_jobconf_parse(&c, text, "fuzz", &err) == FK_OK) {
        for (int planned = 1; planned <= 3; planned++)
            if (fk_jobconf_quorum(&c, planned) < 1)
                abort();
        if (c.n_clients > 0 && fk_jobconf_client_index(&c, c.clients[c.n_clients - 1]) < 0)
            abort();
    }
    fk_jobconf_close(&c);
    int64_t job;
    int attempt;
    fk_task_id_parse(text, &job, &attempt);
    free(text);
    return 0;
}
