/* SPDX-License-Identifier: BSD-3-Clause */
/* The rank count gsrun reads from mpirun's arguments (an early agent starts
 * no MPS for a job whose every rank has a GPU of its own): the sum over the
 * app contexts, and 0 wherever it cannot be sure. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "launcher/mpirun_cmd.h"

static int count(const char *line)
{
    static char buf[1024];
    char *args[64];
    int n = 0;
    strncpy(buf, line, sizeof(buf) - 1);
    for (char *t = strtok(buf, " "); t != NULL && n < 64; t = strtok(NULL, " ")) {
        args[n++] = t;
    }
    return gs_mpirun_count_ranks(args, n);
}

static void test_counts(void **state)
{
    (void)state;
    assert_int_equal(count("-np 4 ./app"), 4);
    assert_int_equal(count("-n 1 ./app -n 7"), 1); /* the program's own -n is its own */
    assert_int_equal(count("--bind-to none --map-by core -x A -np 2 ./app"), 2);
    assert_int_equal(count("--mca btl self,vader -c 3 ./app"), 3);
    assert_int_equal(count("-np 2 ./a : -np 3 ./b"), 5);
    assert_int_equal(count("--oversubscribe --np 16 ./app arg"), 16);
}

static void test_unknown(void **state)
{
    (void)state;
    assert_int_equal(count("./app"), 0);                   /* the hostfile's slots */
    assert_int_equal(count("-np 2 ./a : ./b"), 0);         /* a context without */
    assert_int_equal(count("--some-new-option x -np 2 ./app"), 0);
    assert_int_equal(count("-np two ./app"), 0);
    assert_int_equal(count("-np 0 ./app"), 0);
    assert_int_equal(count("-np"), 0);
    assert_int_equal(count(""), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
