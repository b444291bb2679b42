/* SPDX-License-Identifier: BSD-3-Clause */
/* Small string helpers (runtime/core/text.c): a value in an environment
 * block, read within its length. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "runtime/core/text.h"

static void test_env_value(void **state)
{
    static const char block[] = "A=1\0AB=22\0EMPTY=\0LAST=end";
    size_t n = 0;
    (void)state;
    const char *v = gs_text_env_value(block, sizeof(block) - 1, "AB", &n);
    assert_non_null(v);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "22", 2);
    v = gs_text_env_value(block, sizeof(block) - 1, "A", &n); /* not AB's prefix */
    assert_int_equal(n, 1);
    assert_memory_equal(v, "1", 1);
    assert_non_null(gs_text_env_value(block, sizeof(block) - 1, "EMPTY", &n));
    assert_int_equal(n, 0);
    /* The last entry, with no NUL within the length: bounded by it. */
    v = gs_text_env_value(block, sizeof(block) - 3, "LAST", &n);
    assert_int_equal(n, 1);
    assert_memory_equal(v, "e", 1);
    assert_null(gs_text_env_value(block, sizeof(block) - 1, "B", NULL));
    assert_null(gs_text_env_value(block, sizeof(block) - 1, "LASTX", NULL));
    assert_null(gs_text_env_value(block, 0, "A", NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
