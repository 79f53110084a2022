/* Tests for hali_status_t. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tests/testutil.h"

START_TEST(status_ok_is_null) {
  ck_assert_ptr_null(HALI_OK);
  ck_assert_int_eq(hali_status_code(HALI_OK), HALI_STATUS_OK);
  ck_assert_str_eq(hali_status_message(HALI_OK), "");
  ck_assert_ptr_null(hali_status_annotate(HALI_OK, "ignored %d", 1));
}
END_TEST

START_TEST(status_make_annotate_clone) {
  hali_status_t s = hali_status_make(HALI_STATUS_NOT_FOUND, "no @%s", "f");
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_NOT_FOUND);
  ck_assert_str_eq(hali_status_message(s), "no @f");
  s = hali_status_annotate(s, "at @g@%d", 3);
  s = hali_status_annotate(s, "at @main@%d", 1);
  ck_assert_uint_eq(hali_status_annotation_count(s), 2);
  ck_assert_str_eq(hali_status_annotation(s, 0), "at @g@3");
  hali_status_t c = hali_status_clone(s);
  char *text = hali_status_to_string(c);
  ck_assert_str_eq(text, "NOT_FOUND: no @f\n  at @g@3\n  at @main@1");
  free(text);
  hali_status_free(c);
  ck_assert(hali_status_consume_code(s, HALI_STATUS_NOT_FOUND));
}
END_TEST

/* Context is bounded: the first 48 lines, one line counting what is left
 * out, the last 15; a clone keeps exactly that. */
START_TEST(status_annotations_are_bounded) {
  hali_status_t s = hali_status_make(HALI_STATUS_INTERNAL, "deep");
  for (int i = 0; i < 1000; ++i) s = hali_status_annotate(s, "line %d", i);
  ck_assert_uint_eq(hali_status_annotation_count(s), 64);
  ck_assert_str_eq(hali_status_annotation(s, 0), "line 0");
  ck_assert_str_eq(hali_status_annotation(s, 47), "line 47");
  ck_assert_str_eq(hali_status_annotation(s, 48),
                   "... 937 more lines of context not shown");
  ck_assert_str_eq(hali_status_annotation(s, 49), "line 985");
  ck_assert_str_eq(hali_status_annotation(s, 63), "line 999");
  hali_status_t c = hali_status_clone(s);
  ck_assert_uint_eq(hali_status_annotation_count(c), 64);
  for (size_t i = 0; i < 64; ++i)
    ck_assert_str_eq(hali_status_annotation(c, i), hali_status_annotation(s, i));
  /* One more line on the clone rolls its tail and counts on. */
  c = hali_status_annotate(c, "line 1000");
  ck_assert_str_eq(hali_status_annotation(c, 48),
                   "... 938 more lines of context not shown");
  ck_assert_str_eq(hali_status_annotation(c, 49), "line 986");
  ck_assert_str_eq(hali_status_annotation(c, 63), "line 1000");
  hali_status_free(c);
  hali_status_free(s);
  /* At exactly 64 lines nothing is left out. */
  s = hali_status_make(HALI_STATUS_INTERNAL, "full");
  for (int i = 0; i < 64; ++i) s = hali_status_annotate(s, "line %d", i);
  ck_assert_uint_eq(hali_status_annotation_count(s), 64);
  ck_assert_str_eq(hali_status_annotation(s, 48), "line 48");
  ck_assert_str_eq(hali_status_annotation(s, 63), "line 63");
  s = hali_status_annotate(s, "line 64");
  ck_assert_str_eq(hali_status_annotation(s, 48),
                   "... 2 more lines of context not shown");
  ck_assert_str_eq(hali_status_annotation(s, 63), "line 64");
  hali_status_free(s);
}
END_TEST

START_TEST(status_ok_code_becomes_unknown) {
  hali_status_t s = hali_status_make(HALI_STATUS_OK, "x");
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_UNKNOWN);
  hali_status_free(s);
  ck_assert_str_eq(hali_status_code_name(HALI_STATUS_DEADLINE_EXCEEDED),
                   "DEADLINE_EXCEEDED");
}
END_TEST

static hali_status_t fails_inner(void) {
  return hali_status_make(HALI_STATUS_OUT_OF_RANGE, "inner");
}
static hali_status_t fails_outer(int x) {
  HALI_RETURN_IF_ERROR(fails_inner(), "outer %d", x);
  return HALI_OK;
}

START_TEST(status_return_if_error_annotates) {
  hali_status_t s = fails_outer(7);
  ck_assert_str_eq(hali_status_annotation(s, 0), "outer 7");
  hali_status_free(s);
}
END_TEST

/* One out-of-memory status, one message; context goes in annotations. */
START_TEST(status_oom_has_one_message) {
  hali_status_t s = hali_status_oom();
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(hali_status_message(s), "out of memory");
  s = hali_status_annotate(s, "creating a fence");
  char *text = hali_status_to_string(s);
  ck_assert_str_eq(text,
                   "RESOURCE_EXHAUSTED: out of memory\n  creating a fence");
  free(text);
  hali_status_t t = hali_status_oom();
  ck_assert_ptr_ne(s, t); /* each is the caller's to free */
  ck_assert_str_eq(hali_status_message(t), hali_status_message(s));
  hali_status_free(t);
  ck_assert(hali_status_consume_code(s, HALI_STATUS_RESOURCE_EXHAUSTED));
}
END_TEST

/* DEFERRED (base/status.h): a code outside the public range, carried by one
 * static status that freeing and annotating leave alone. */
START_TEST(status_deferred_is_its_own_code) {
  hali_status_t s = hali_status_deferred();
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_eq(hali_status_deferred(), s);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_DEFERRED);
  ck_assert_int_ge(HALI_STATUS_DEFERRED, HALI_STATUS_CODE_COUNT);
  ck_assert(hali_status_is_deferred(s));
  ck_assert(!hali_status_is_deferred(HALI_OK));
  hali_status_t other = hali_status_make(HALI_STATUS_UNAVAILABLE, "later");
  ck_assert(!hali_status_is_deferred(other));
  hali_status_free(other);
  ck_assert_str_eq(hali_status_code_name(HALI_STATUS_DEFERRED), "DEFERRED");
  ck_assert_ptr_eq(hali_status_annotate(s, "at @f@%d", 1), s);
  ck_assert_uint_eq(hali_status_annotation_count(s), 0);
  ck_assert_ptr_eq(hali_status_clone(s), s);
  char *text = hali_status_to_string(s);
  ck_assert_ptr_nonnull(text);
  ck_assert(strncmp(text, "DEFERRED: ", 10) == 0);
  free(text);
  hali_status_free(s); /* a no-op: still usable */
  ck_assert_int_eq(hali_status_code(hali_status_deferred()),
                   HALI_STATUS_DEFERRED);
}
END_TEST

static Suite *suite_status(void) {
  Suite *s = suite_create("status");
  TCase *tc = tcase_create("status");
  tcase_add_test(tc, status_ok_is_null);
  tcase_add_test(tc, status_make_annotate_clone);
  tcase_add_test(tc, status_annotations_are_bounded);
  tcase_add_test(tc, status_ok_code_becomes_unknown);
  tcase_add_test(tc, status_return_if_error_annotates);
  tcase_add_test(tc, status_oom_has_one_message);
  tcase_add_test(tc, status_deferred_is_its_own_code);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return hali_test_main(suite_status()); }
