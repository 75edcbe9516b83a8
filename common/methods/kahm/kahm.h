/* Job type `kahm`: one-shot collaborative classification with kernel affine hull
 * machines (spec kahm.md §8). Round 1: every client fits the KAHMs of the classes it
 * holds. Mode B (default): the models stay on the clients and the server's model is
 * the list of (client, classes held, samples). Mode A (opt-in twice: the job's
 * upload_models = 1 and the client's own [local] allow_model_upload = true): the clients upload
 * their KAHMs, which carry their training samples in recoverable form. */
#ifndef FK_METHODS_KAHM_H
#define FK_METHODS_KAHM_H

#include "common/methods/method.h"

extern const fk_method fk_method_kahm;

/* Largest class count and dimension a message may declare. */
enum { FK_KAHM_MAX_COUNT = 10000000, FK_KAHM_MAX_DIM = 1000000, FK_KAHM_MAX_PARTS = 10000 };
/* Most query rows in one prediction batch (mode-B serving asks every holder client). */
enum { FK_KAHM_MAX_QUERIES = 100000 };

#endif
