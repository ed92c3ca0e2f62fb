/* test_status.c - error recording keeps the first message and relays the trail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/status.h"

static bk_status inner(bk_err *err) { return BK_FAIL(err, BK_ERR_INPUT, "bad %s", "thing"); }
static bk_status outer(bk_err *err)
{
    bk_status st = BK_OK;
    BK_TRY(inner(err));
    BK_FAIL(err, BK_ERR_INTERNAL, "not reached");
out:
    return st;
}

static void test_first_message_wins(void **state)
{
    (void)state;
    bk_err err = { 0 };
    assert_int_equal(outer(&err), BK_ERR_INPUT);
    assert_string_equal(err.msg, "bad thing");
    assert_non_null(strstr(err.trail, "<-"));
    BK_FAIL(&err, BK_ERR_SYSTEM, "later");
    assert_string_equal(err.msg, "bad thing");
    bk_err_clear(&err);
    assert_int_equal(err.code, BK_OK);
}

static void test_strlcpy(void **state)
{
    (void)state;
    char b[4];
    assert_int_equal(bk_strlcpy(b, "abc", sizeof b), 0);
    assert_int_not_equal(bk_strlcpy(b, "abcd", sizeof b), 0);
    assert_string_equal(b, "abc");
}

/* A reason cut to its buffer ends after a whole word with "...", never mid-word. */
static void test_strlcpy_words(void **state)
{
    (void)state;
    char b[16];
    assert_int_equal(bk_strlcpy_words(b, "fits whole", sizeof b), 0);
    assert_string_equal(b, "fits whole");
    /* 12 bytes of room before "...": "engine crashed" would be cut inside "crashed" */
    assert_int_not_equal(bk_strlcpy_words(b, "arm C engine crashed: signal 11", sizeof b), 0);
    assert_string_equal(b, "arm C engine...");
    /* the separator before the cut goes with it */
    assert_int_not_equal(bk_strlcpy_words(b, "rank 1 fail; rank 2 failed", sizeof b), 0);
    assert_string_equal(b, "rank 1 fail...");
    /* one word longer than the buffer: cut where it must, between UTF-8 characters */
    assert_int_not_equal(bk_strlcpy_words(b, "abcdefghijk\xc3\xa9zzz", sizeof b), 0);
    assert_string_equal(b, "abcdefghijk...");
    assert_int_not_equal(bk_strlcpy_words(b, "abcdefghijklmnopq", sizeof b), 0);
    assert_string_equal(b, "abcdefghijkl...");
    char t[3];
    assert_int_not_equal(bk_strlcpy_words(t, "abc", sizeof t), 0);
    assert_string_equal(t, "..");
}

/* Environment variables by prefix, in name order, appended whole or counted as left out. */
static void test_env_words(void **state)
{
    (void)state;
    char buf[64] = "gate=1";
    setenv("BKTEST_B", "two", 1);
    setenv("BKTEST_A", "one", 1);
    setenv("XBKTEST_C", "not-mine", 1);
    assert_int_equal(bk_env_words("BKTEST_", buf, sizeof buf), 0);
    assert_string_equal(buf, "gate=1 BKTEST_A=one BKTEST_B=two");
    /* too small for the second: it is counted, never cut */
    char small[40] = "gate=1";
    assert_int_equal(bk_env_words("BKTEST_", small, sizeof small), 1);
    assert_string_equal(small, "gate=1 BKTEST_A=one +1 more");
    /* values that would split into several words, or carry quotes, come quoted */
    char q[128] = "";
    setenv("BKTEST_A", "a b", 1);
    setenv("BKTEST_B", "say \"hi\"\\", 1);
    setenv("BKTEST_D", "tab\there", 1);
    setenv("BKTEST_E", "", 1);
    assert_int_equal(bk_env_words("BKTEST_", q, sizeof q), 0);
    assert_string_equal(q, " BKTEST_A=\"a b\" BKTEST_B=\"say \\\"hi\\\"\\\\\" "
                           "BKTEST_D=\"tab\\x09here\" BKTEST_E=");
    unsetenv("BKTEST_D");
    unsetenv("BKTEST_E");
    char none[16] = "x";
    assert_int_equal(bk_env_words("BKTEST_NOPE", none, sizeof none), 0);
    assert_string_equal(none, "x");
    unsetenv("BKTEST_A");
    unsetenv("BKTEST_B");
    unsetenv("XBKTEST_C");
}

/* bk_text_clean: byte for byte; a tab, newline or CR a blank; other controls, DEL, C1 and
 * every byte of what is not UTF-8 (as jansson reads it) '?'; UTF-8 kept as it is */
static void test_text_clean(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
        size_t changed;
    } cases[] = {
        { "", "", 0 },
        { "plain text, caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 U+10FFFF \xf4\x8f\xbf\xbf",
          "plain text, caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 U+10FFFF \xf4\x8f\xbf\xbf", 0 },
        { "a\tb\nc\rd", "a b c d", 3 },
        { "x\x1b[31mred\x07\x7f", "x?[31mred??", 3 },
        { "C1 \xc2\x9b" "2J and \xc2\x80, not \xc2\xa0", "C1 ??2J and ??, not \xc2\xa0", 4 },
        { "latin-1 caf\xe9!", "latin-1 caf?!", 1 },
        { "cut \xe2\x82", "cut ??", 2 },                  /* a character cut at the end */
        { "lone \x80\xbf cont", "lone ?? cont", 2 },
        { "overlong \xc0\xaf \xe0\x80\xaf \xf0\x80\x80\xaf", "overlong ?? ??? ????", 9 },
        { "surrogate \xed\xa0\x80", "surrogate ???", 3 },
        { "past \xf4\x90\x80\x80 \xf5\x80", "past ???? ??", 6 },
        { "short \xf0\x9f\x98x", "short ???x", 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        const size_t n = strlen(buf);
        const size_t changed = bk_text_clean(buf);
        if (strcmp(buf, cases[i].out) != 0 || changed != cases[i].changed)
            fail_msg("case %zu: got \"%s\" (%zu changed), want \"%s\" (%zu)", i, buf, changed,
                     cases[i].out, cases[i].changed);
        assert_int_equal(strlen(buf), n);
        assert_int_equal(bk_control_at(buf), -1);
        /* what it leaves, jansson takes (what it changed it did not, where bytes were bad) */
        json_t *j = json_string(buf);
        assert_non_null(j);
        json_decref(j);
    }
    assert_int_equal(bk_control_at("ok \xc2\xa0 text"), -1);
    assert_int_equal(bk_control_at("a\tb"), 1);
    assert_int_equal(bk_control_at("ab\xc2\x85"), 2);
    assert_int_equal(bk_control_at("\x7f"), 0);
    assert_int_equal(bk_control_at("end \xc2"), -1); /* not a control: bk_text_clean's */
    assert_int_equal(bk_control_at_tab_ok("a\tb\x1b"), 3);
    /* bk_utf8_cut: where "%.*s" may cut between characters */
    assert_int_equal(bk_utf8_cut("abc", 5), 3);
    assert_int_equal(bk_utf8_cut("abcdef", 5), 5);
    assert_int_equal(bk_utf8_cut("abcd\xc3\xa9", 5), 4);   /* é would be cut: before it */
    assert_int_equal(bk_utf8_cut("abcd\xc3\xa9", 6), 6);   /* whole */
    assert_int_equal(bk_utf8_cut("ab\xe2\x82\xacx", 4), 2); /* € cut after 2 of 3 */
    assert_int_equal(bk_utf8_cut("ab\xe2\x82\xacx", 5), 5);
    assert_int_equal(bk_utf8_cut("", 3), 0);
}

/* bk_wait_bound: a wait's own bound, or what is left before an end that comes first */
static void test_wait_bound(void **state)
{
    (void)state;
    int cut = -1;
    assert_true(bk_wait_bound(0, 30.0, &cut) == 30.0); /* no end */
    assert_int_equal(cut, 0);
    const uint64_t now = bk_now_ns();
    assert_true(bk_wait_bound(now + 3600000000000ull, 30.0, &cut) == 30.0); /* an hour away */
    assert_int_equal(cut, 0);
    double w = bk_wait_bound(bk_now_ns() + 2000000000ull, 30.0, &cut); /* 2 s away */
    assert_int_equal(cut, 1);
    assert_true(w > 1.0 && w <= 2.0);
    assert_true(bk_wait_bound(now - 1, 30.0, &cut) == 0.0); /* passed: nothing left */
    assert_int_equal(cut, 1);
    assert_true(bk_wait_bound(1, 30.0, &cut) == 0.0);
    assert_int_equal(cut, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_message_wins),
        cmocka_unit_test(test_strlcpy),
        cmocka_unit_test(test_strlcpy_words),
        cmocka_unit_test(test_env_words),
        cmocka_unit_test(test_text_clean),
        cmocka_unit_test(test_wait_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
