/* Test helper: two bundles hold the same tensors, bit for bit (by name, any order).
 * Include after <cmocka.h>. */
#ifndef FK_TEST_BUNDLE_ASSERT_H
#define FK_TEST_BUNDLE_ASSERT_H

#include "common/base/bundle.h"

static inline void assert_bundles_equal(const fk_bundle *a, const fk_bundle *b)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const fk_tensor *t = fk_bundle_get(b, a->items[i].name);
        assert_non_null(t);
        assert_int_equal(t->len, a->items[i].len);
        assert_memory_equal(t->data, a->items[i].data, t->len * sizeof(double));
    }
}

#endif
