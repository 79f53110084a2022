/* hali — parameter archives (loader/params.c, loader/npy.c) and their API
 * (api/params.c).
 *
 * Every file here is written by the test itself, byte by byte, from C
 * arrays; what a load returns is compared with those arrays, and whether a
 * buffer aliases the file's mapping is read off its host pointer.  Files
 * live in a directory made by mkdtemp for each test case.
 *
 * The "numpy" case runs only under tests/params_numpy.test, which has
 * numpy write the files (an independent writer) and names their directory
 * in HALI_PARAMS_NUMPY_DIR.
 */
#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_int.h"
#include "hal/hal.h"
#include "loader/npy.h"
#include "loader/params.h"
#include "tests/testutil.h"

static char tmpdir[] = "/tmp/hali-params-XXXXXX";

static void make_tmpdir(void) {
  strcpy(tmpdir, "/tmp/hali-params-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (!d) return;
  struct dirent *e;
  char path[512];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(tmpdir);
}

static const char *tmp(const char *name) {
  static char bufs[4][512];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, name);
  return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

/* A .safetensors file: |json|, padded with spaces so that the data starts
 * |misalign| bytes past a multiple of 64, then |n| bytes of |data|. */
static void write_st(const char *path, const char *json, size_t misalign,
                     const void *data, size_t n) {
  size_t len = strlen(json);
  size_t start = 8 + len;
  size_t pad = (64 + misalign - start % 64) % 64;
  uint64_t hlen = len + pad;
  uint8_t *buf = calloc(8 + hlen + n + 1, 1);
  ck_assert_ptr_nonnull(buf);
  for (int i = 0; i < 8; ++i) buf[i] = (uint8_t)(hlen >> (8 * i));
  memcpy(buf + 8, json, len);
  memset(buf + 8 + len, ' ', pad);
  if (n) memcpy(buf + 8 + hlen, data, n);
  write_bytes(path, buf, 8 + hlen + n);
  free(buf);
}

/* A .npy (version 1.0) whose header is padded so that the data starts
 * |misalign| bytes past a multiple of 64 (numpy itself pads to 64). */
static void write_npy(const char *path, const char *dict, size_t misalign,
                      const void *data, size_t n) {
  size_t len = strlen(dict) + 1; /* + '\n' */
  size_t pad = (64 + misalign - (10 + len) % 64) % 64;
  size_t hlen = len + pad;
  uint8_t *buf = calloc(10 + hlen + n + 1, 1);
  ck_assert_ptr_nonnull(buf);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (uint8_t)hlen;
  buf[9] = (uint8_t)(hlen >> 8);
  memcpy(buf + 10, dict, len - 1);
  memset(buf + 10 + len - 1, ' ', pad);
  buf[10 + hlen - 1] = '\n';
  if (n) memcpy(buf + 10 + hlen, data, n);
  write_bytes(path, buf, 10 + hlen + n);
  free(buf);
}

static hali_ir_xtype_t tensor_type(uint32_t element_type, uint32_t rank,
                                   int64_t *dims) {
  hali_ir_xtype_t x = {HALI_TYPE_NONE, element_type, rank, dims};
  return x;
}

static hali_hal_allocator_t *allocator;
static hali_param_set_t *set;

static void setup(void) {
  make_tmpdir();
  ck_assert_ok(hali_hal_allocator_create(NULL, &allocator));
  ck_assert_ok(hali_param_set_create(&set));
}

static void teardown(void) {
  hali_param_set_release(set);
  set = NULL;
  hali_hal_allocator_release(allocator);
  allocator = NULL;
  remove_tmpdir();
}

/* Whether |b|'s bytes lie in the mapping of |scope|::|key|. */
static bool aliases_mapping(hali_hal_buffer_t *b, const char *scope,
                            const char *key) {
  hali_param_info_t info;
  ck_assert_ok(hali_param_set_find(set, scope, key, &info));
  void *p = NULL;
  ck_assert_ok(hali_hal_buffer_map_range(b, 0, HALI_HAL_WHOLE_BUFFER, &p));
  const uint8_t *u = p;
  return u >= info.mapping && u < info.mapping + info.mapping_size;
}

static void expect_bytes(hali_hal_buffer_t *b, const void *want, size_t n) {
  ck_assert_uint_eq(hali_hal_buffer_length(b), n);
  uint8_t got[4096];
  ck_assert_uint_le(n, sizeof(got));
  ck_assert_ok(hali_hal_buffer_read(b, 0, got, n));
  ck_assert_mem_eq(got, want, n);
}

/* The weights of the tests: a 2x3 f32 and a 4 i32, back to back. */
static const float w23[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e30f};
static const int32_t i4[4] = {7, -1, 0x7fffffff, -2147483647 - 1};
static const char *two_json =
    "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": "
    "[0, 24]}, \"n\": {\"dtype\": \"I32\", \"shape\": [4], "
    "\"data_offsets\": [64, 80]}, \"__metadata__\": {\"format\": \"pt\"}}";

static void write_two(const char *path, size_t misalign) {
  uint8_t data[80] = {0};
  memcpy(data, w23, 24);
  memcpy(data + 64, i4, 16);
  write_st(path, two_json, misalign, data, sizeof(data));
}

/* ------------------------------------------------------------------------ */
/* safetensors */

START_TEST(st_aligned_aliases) {
  write_two(tmp("m.safetensors"), 0);
  ck_assert_ok(hali_param_set_add_file(set, "model", tmp("m.safetensors")));
  ck_assert_uint_eq(hali_param_set_file_count(set), 1);
  int64_t d23[] = {2, 3}, d4[] = {4};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 2, d23);
  hali_hal_buffer_t *b = NULL;
  hali_hal_allocator_statistics_t before, after;
  hali_hal_allocator_query_statistics(allocator, &before);
  ck_assert_ok(hali_param_set_load(set, "model", "w", &t, allocator, &b));
  expect_bytes(b, w23, sizeof(w23));
  ck_assert(aliases_mapping(b, "model", "w"));
  hali_hal_allocator_query_statistics(allocator, &after);
  ck_assert_uint_eq(after.allocation_count, before.allocation_count);
  /* Read-only: a write names the parameter. */
  float one = 1.0f;
  ck_assert_status(hali_hal_buffer_write(b, 0, &one, 4),
                   HALI_STATUS_PERMISSION_DENIED,
                   "parameter 'model'::'w' (read-only mapping of");
  ck_assert(hali_hal_buffer_usage(b) & HALI_HAL_BUFFER_USAGE_CONSTANT);
  /* The buffer keeps the mapping alive past the set. */
  hali_param_set_release(set);
  set = NULL;
  expect_bytes(b, w23, sizeof(w23));
  hali_hal_buffer_release(b);
  (void)d4;
}
END_TEST

START_TEST(st_misaligned_copies) {
  write_two(tmp("m.safetensors"), 8);
  ck_assert_ok(hali_param_set_add_file(set, "", tmp("m.safetensors")));
  int64_t d4[] = {4};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_INT_32, 1, d4);
  hali_hal_allocator_statistics_t before, after;
  hali_hal_allocator_query_statistics(allocator, &before);
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_param_set_load(set, "", "n", &t, allocator, &b));
  expect_bytes(b, i4, sizeof(i4));
  ck_assert(!aliases_mapping(b, "", "n"));
  hali_hal_allocator_query_statistics(allocator, &after);
  ck_assert_uint_eq(after.allocation_count, before.allocation_count + 1);
  ck_assert_uint_eq(after.bytes_live, before.bytes_live + 16);
  hali_hal_buffer_release(b);
  /* Without an allocator there is nothing to copy into. */
  ck_assert_status(hali_param_set_load(set, "", "n", &t, NULL, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "is not 64-byte aligned and needs a copy");
  ck_assert_ptr_null(b);
  /* A memory limit applies to the copy. */
  hali_hal_allocator_set_max_bytes(allocator, 8);
  ck_assert_status(hali_param_set_load(set, "", "n", &t, allocator, &b),
                   HALI_STATUS_RESOURCE_EXHAUSTED,
                   "parameter ''::'n'");
}
END_TEST

/* Every safetensors dtype hali has, one tensor each, loaded as its hali
 * type. */
START_TEST(st_every_dtype) {
  static const struct {
    const char *dtype;
    uint32_t type;
  } cases[] = {
      {"BOOL", HALI_HAL_ELEMENT_TYPE_BOOL_8},
      {"U8", HALI_HAL_ELEMENT_TYPE_UINT_8},
      {"I8", HALI_HAL_ELEMENT_TYPE_SINT_8},
      {"U16", HALI_HAL_ELEMENT_TYPE_UINT_16},
      {"I16", HALI_HAL_ELEMENT_TYPE_SINT_16},
      {"U32", HALI_HAL_ELEMENT_TYPE_UINT_32},
      {"I32", HALI_HAL_ELEMENT_TYPE_SINT_32},
      {"U64", HALI_HAL_ELEMENT_TYPE_UINT_64},
      {"I64", HALI_HAL_ELEMENT_TYPE_SINT_64},
      {"F16", HALI_HAL_ELEMENT_TYPE_FLOAT_16},
      {"BF16", HALI_HAL_ELEMENT_TYPE_BFLOAT_16},
      {"F32", HALI_HAL_ELEMENT_TYPE_FLOAT_32},
      {"F64", HALI_HAL_ELEMENT_TYPE_FLOAT_64},
  };
  size_t n = sizeof(cases) / sizeof(cases[0]);
  char json[4096];
  size_t at = 0;
  uint8_t data[64 * 16];
  for (size_t i = 0; i < sizeof(data); ++i) data[i] = (uint8_t)(i * 37 + 1);
  at += (size_t)snprintf(json + at, sizeof(json) - at, "{");
  for (size_t i = 0; i < n; ++i) {
    /* Three elements each, every tensor at a multiple of 64. */
    size_t bytes = 3 * hali_hal_element_type_byte_size(cases[i].type);
    at += (size_t)snprintf(json + at, sizeof(json) - at,
                           "%s\"t%zu\": {\"dtype\": \"%s\", \"shape\": [3], "
                           "\"data_offsets\": [%zu, %zu]}",
                           i ? ", " : "", i, cases[i].dtype, i * 64,
                           i * 64 + bytes);
  }
  snprintf(json + at, sizeof(json) - at, "}");
  write_st(tmp("all.safetensors"), json, 0, data, sizeof(data));
  ck_assert_ok(hali_param_set_add_file(set, "s", tmp("all.safetensors")));
  for (size_t i = 0; i < n; ++i) {
    char key[16];
    snprintf(key, sizeof(key), "t%zu", i);
    int64_t d3[] = {3};
    hali_ir_xtype_t t = tensor_type(cases[i].type, 1, d3);
    hali_hal_buffer_t *b = NULL;
    ck_assert_ok(hali_param_set_load(set, "s", key, &t, allocator, &b));
    expect_bytes(b, data + i * 64,
                 3 * hali_hal_element_type_byte_size(cases[i].type));
    ck_assert(aliases_mapping(b, "s", key));
    hali_hal_buffer_release(b);
    hali_param_info_t info;
    ck_assert_ok(hali_param_set_find(set, "s", key, &info));
    ck_assert_str_eq(info.dtype, cases[i].dtype);
    ck_assert_uint_eq(info.element_type, cases[i].type);
  }
}
END_TEST

/* The declaration decides: same type, or integers of one width where one
 * side is signless, or i1 for BOOL; anything else is named. */
START_TEST(st_type_and_shape_checks) {
  write_two(tmp("m.safetensors"), 0);
  ck_assert_ok(hali_param_set_add_file(set, "m", tmp("m.safetensors")));
  hali_hal_buffer_t *b = NULL;
  int64_t d4[] = {4}, d23[] = {2, 3}, d32[] = {3, 2}, d6[] = {6};
  int64_t ddyn[] = {2, -1};
  uint32_t ok_types[] = {HALI_HAL_ELEMENT_TYPE_INT_32,
                         HALI_HAL_ELEMENT_TYPE_SINT_32};
  for (size_t i = 0; i < 2; ++i) {
    hali_ir_xtype_t t = tensor_type(ok_types[i], 1, d4);
    ck_assert_ok(hali_param_set_load(set, "m", "n", &t, allocator, &b));
    hali_hal_buffer_release(b);
  }
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_UINT_32, 1, d4);
  ck_assert_status(hali_param_set_load(set, "m", "n", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "parameter 'm'::'n' in ");
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_UINT_32, 1, d4);
  ck_assert_status(hali_param_set_load(set, "m", "n", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "the element type differs: declared tensor<4xu32>, the "
                   "file holds 4xsi32 (dtype I32)");
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_64, 2, d23);
  ck_assert_status(hali_param_set_load(set, "m", "w", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "declared tensor<2x3xf64>, the file holds 2x3xf32");
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 2, d32);
  ck_assert_status(hali_param_set_load(set, "m", "w", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "the shape differs: declared tensor<3x2xf32>");
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 1, d6);
  ck_assert_status(hali_param_set_load(set, "m", "w", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "the rank differs: declared tensor<6xf32>, the file "
                   "holds 2x3xf32");
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 2, ddyn);
  ck_assert_status(hali_param_set_load(set, "m", "w", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "dimension 1 of the declaration is dynamic");
  hali_ir_xtype_t scalar = {HALI_TYPE_F32, 0, 0, NULL};
  ck_assert_status(hali_param_set_load(set, "m", "w", &scalar, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT, "declared with a scalar type");
  ck_assert_ptr_null(b);
}
END_TEST

START_TEST(st_bool_and_f8) {
  uint8_t data[128] = {1, 0, 1};
  write_st(tmp("b.safetensors"),
           "{\"flags\": {\"dtype\": \"BOOL\", \"shape\": [3], "
           "\"data_offsets\": [0, 3]}, \"q\": {\"dtype\": \"F8_E5M2\", "
           "\"shape\": [2], \"data_offsets\": [64, 66]}}",
           0, data, sizeof(data));
  ck_assert_ok(hali_param_set_add_file(set, "b", tmp("b.safetensors")));
  int64_t d3[] = {3}, d2[] = {2};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_INT_1, 1, d3);
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_param_set_load(set, "b", "flags", &t, allocator, &b));
  expect_bytes(b, data, 3);
  hali_hal_buffer_release(b);
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_UINT_8, 1, d2);
  ck_assert_status(hali_param_set_load(set, "b", "q", &t, allocator, &b),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "the element type (no hali type) differs: declared "
                   "tensor<2xu8>, the file holds 2xF8_E5M2");
}
END_TEST

START_TEST(st_not_found) {
  write_two(tmp("a.safetensors"), 0);
  write_st(tmp("b.safetensors"),
           "{\"z\": {\"dtype\": \"U8\", \"shape\": [], \"data_offsets\": "
           "[0, 1]}}",
           0, "\x05", 1);
  ck_assert_ok(hali_param_set_add_file(set, "m", tmp("a.safetensors")));
  ck_assert_ok(hali_param_set_add_file(set, "m", tmp("b.safetensors")));
  ck_assert_uint_eq(hali_param_set_file_count(set), 2);
  int64_t d4[] = {4};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_INT_32, 1, d4);
  hali_hal_buffer_t *b = NULL;
  ck_assert_status(hali_param_set_load(set, "other", "n", &t, allocator, &b),
                   HALI_STATUS_NOT_FOUND,
                   "no parameters bound for scope 'other'");
  char want[1200];
  snprintf(want, sizeof(want), "parameter 'm'::'nope' is not in %s, %s",
           tmp("a.safetensors"), tmp("b.safetensors"));
  ck_assert_status(hali_param_set_load(set, "m", "nope", &t, allocator, &b),
                   HALI_STATUS_NOT_FOUND, want);
  /* Rank 0 from the second file of the scope. */
  hali_ir_xtype_t u8 = tensor_type(HALI_HAL_ELEMENT_TYPE_UINT_8, 0, NULL);
  ck_assert_ok(hali_param_set_load(set, "m", "z", &u8, allocator, &b));
  expect_bytes(b, "\x05", 1);
  hali_hal_buffer_release(b);
  /* Listing: the files in the order added, each in its own order. */
  hali_param_info_t info;
  const char *keys[] = {"w", "n", "z"};
  for (size_t i = 0; i < 3; ++i) {
    ck_assert_ok(hali_param_set_entry(set, "m", i, &info));
    ck_assert_str_eq(info.key, keys[i]);
  }
  ck_assert_str_eq(info.path, tmp("b.safetensors"));
  ck_assert_status(hali_param_set_entry(set, "m", 3, &info),
                   HALI_STATUS_OUT_OF_RANGE,
                   "scope 'm' holds 3 parameters, not 4");
  ck_assert_status(hali_param_set_entry(set, "q", 0, &info),
                   HALI_STATUS_NOT_FOUND, "no parameters bound for scope 'q'");
  /* A NULL set has no scopes (h14a's globals may pass it). */
  ck_assert_status(hali_param_set_load(NULL, "m", "z", &u8, allocator, &b),
                   HALI_STATUS_NOT_FOUND, "no parameters bound for scope 'm'");
}
END_TEST

/* A key twice in one scope is an error naming both files, and the set is
 * as it was; the same key in two scopes is fine. */
START_TEST(st_duplicate_across_files) {
  write_two(tmp("a.safetensors"), 0);
  write_two(tmp("b.safetensors"), 0);
  ck_assert_ok(hali_param_set_add_file(set, "m", tmp("a.safetensors")));
  char want[1200];
  snprintf(want, sizeof(want), "parameter 'm'::'w' is already in %s",
           tmp("a.safetensors"));
  hali_status_t s = hali_param_set_add_file(set, "m", tmp("b.safetensors"));
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT, want);
  ck_assert_uint_eq(hali_param_set_file_count(set), 1);
  hali_param_info_t info;
  ck_assert_ok(hali_param_set_find(set, "m", "n", &info));
  ck_assert_str_eq(info.path, tmp("a.safetensors"));
  ck_assert_ok(hali_param_set_add_file(set, "m2", tmp("b.safetensors")));
  ck_assert_ok(hali_param_set_find(set, "m2", "w", &info));
  ck_assert_str_eq(info.path, tmp("b.safetensors"));
  /* A failed add to a new scope leaves no empty scope behind. */
  ck_assert_status(hali_param_set_add_file(set, "m3", tmp("none.npy")),
                   HALI_STATUS_NOT_FOUND, "cannot open");
  ck_assert_status(hali_param_set_find(set, "m3", "w", &info),
                   HALI_STATUS_NOT_FOUND, "no parameters bound for scope");
}
END_TEST

/* Entries may come in any order and leave gaps, so long as no two share a
 * byte. */
START_TEST(st_order_and_gaps) {
  uint8_t data[256];
  for (int i = 0; i < 256; ++i) data[i] = (uint8_t)i;
  write_st(tmp("o.safetensors"),
           "{\"late\": {\"dtype\": \"U8\", \"shape\": [2, 2], "
           "\"data_offsets\": [128, 132]}, \"early\": {\"dtype\": \"U8\", "
           "\"shape\": [4], \"data_offsets\": [0, 4]}, \"empty\": {\"dtype\": "
           "\"F32\", \"shape\": [0, 5], \"data_offsets\": [4, 4]}, \"inside\": "
           "{\"dtype\": \"I64\", \"shape\": [0], \"data_offsets\": [2, 2]}}",
           0, data, sizeof(data));
  ck_assert_ok(hali_param_set_add_file(set, "o", tmp("o.safetensors")));
  int64_t d22[] = {2, 2}, d05[] = {0, 5};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_UINT_8, 2, d22);
  hali_hal_buffer_t *b = NULL;
  ck_assert_ok(hali_param_set_load(set, "o", "late", &t, allocator, &b));
  expect_bytes(b, data + 128, 4);
  hali_hal_buffer_release(b);
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 2, d05);
  ck_assert_ok(hali_param_set_load(set, "o", "empty", &t, allocator, &b));
  ck_assert_uint_eq(hali_hal_buffer_length(b), 0);
  hali_hal_buffer_release(b);
}
END_TEST

/* Each corrupt index: |json| with |n| data bytes, the code and a piece of
 * the message. */
static const struct {
  const char *json;
  size_t data;
  hali_status_code_t code;
  const char *needle;
} bad_headers[] = {
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]",
     8, HALI_STATUS_DATA_LOSS, "bad JSON header at line 1, column"},
    {"[1, 2]", 0, HALI_STATUS_DATA_LOSS, "does not start with '{'"},
    {"{\"w\": 3}", 0, HALI_STATUS_DATA_LOSS, "entry 'w' is not an object"},
    {"{\"w\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
     HALI_STATUS_DATA_LOSS, "entry 'w' has no \"dtype\" string"},
    {"{\"w\": {\"dtype\": \"C64\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
     8, HALI_STATUS_DATA_LOSS, "entry 'w' has the unknown dtype \"C64\""},
    {"{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8,
     HALI_STATUS_DATA_LOSS, "entry 'w' has no \"shape\" array"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, "
     "8]}}",
     8, HALI_STATUS_DATA_LOSS, "shape[0] is not a non-negative integer"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, "
     "8]}}",
     8, HALI_STATUS_DATA_LOSS, "shape[0] is not a non-negative integer"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}}",
     8, HALI_STATUS_DATA_LOSS, "no \"data_offsets\" pair [BEGIN, END]"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, "
     "\"8\"]}}",
     8, HALI_STATUS_DATA_LOSS, "data_offsets are not non-negative integers"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, "
     "0]}}",
     8, HALI_STATUS_OUT_OF_RANGE, "data_offsets [8, 0] end before they begin"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, "
     "16]}}",
     8, HALI_STATUS_OUT_OF_RANGE,
     "entry 'w': data_offsets [0, 16] lie outside the file (8 data bytes"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": "
     "[9223372036854775800, 9223372036854775807]}}",
     8, HALI_STATUS_OUT_OF_RANGE, "lie outside the file"},
    {"{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, "
     "8]}}",
     8, HALI_STATUS_DATA_LOSS,
     "entry 'w' holds 8 bytes but F32 of its shape needs 12"},
    {"{\"w\": {\"dtype\": \"F64\", \"shape\": [4294967296, 4294967296], "
     "\"data_offsets\": [0, 8]}}",
     8, HALI_STATUS_DATA_LOSS, "the shape's byte size overflows"},
    {"{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
     "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [2, 6]}}",
     8, HALI_STATUS_DATA_LOSS,
     "entries 'a' and 'b' overlap (bytes [0, 4) and [2, 6) of the data)"},
    {"{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
     "\"e\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [1, 1]}, "
     "\"b\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [3, 4]}}",
     8, HALI_STATUS_DATA_LOSS,
     "entries 'a' and 'b' overlap (bytes [0, 4) and [3, 4) of the data)"},
    {"{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, "
     "\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}",
     8, HALI_STATUS_DATA_LOSS, "duplicate object key"},
    {"{\"__metadata__\": [1]}", 0, HALI_STATUS_DATA_LOSS,
     "\"__metadata__\" is not an object"},
    {"{\"__metadata__\": {\"k\": 1}}", 0, HALI_STATUS_DATA_LOSS,
     "\"__metadata__\" value 'k' is not a string"},
    {"{\"w\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
     "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
     "1,1,1,1,1,1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}",
     8, HALI_STATUS_DATA_LOSS, "entry 'w' has rank 65 (at most 64)"},
};

START_TEST(st_corrupt_header) {
  const char *p = tmp("bad.safetensors");
  uint8_t data[16] = {0};
  write_st(p, bad_headers[_i].json, 0, data, bad_headers[_i].data);
  hali_status_t s = hali_param_set_add_file(set, "m", p);
  /* The file is named, and the scope. */
  ck_assert_ptr_nonnull(s);
  ck_assert(strstr(hali_status_message(s), p) != NULL);
  ck_assert_status(s, bad_headers[_i].code, bad_headers[_i].needle);
  ck_assert_uint_eq(hali_param_set_file_count(set), 0);
  /* The same bytes through the checker the fuzz target drives. */
  FILE *f = fopen(p, "rb");
  uint8_t buf[2048];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  size_t count = 99;
  ck_assert_status(hali_param_check_safetensors(buf, n, "mem", &count),
                   bad_headers[_i].code, bad_headers[_i].needle);
  ck_assert_uint_eq(count, 0);
}
END_TEST

START_TEST(st_truncated) {
  const char *p = tmp("t.safetensors");
  write_bytes(p, "", 0);
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   "0 bytes, shorter than the 8-byte header length");
  write_bytes(p, "\x10\x00\x00", 3);
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   "3 bytes, shorter than the 8-byte header length");
  /* A header length past the end (every prefix of a good file is
   * rejected, never read past). */
  write_two(tmp("good.safetensors"), 0);
  FILE *f = fopen(tmp("good.safetensors"), "rb");
  uint8_t good[512];
  size_t n = fread(good, 1, sizeof(good), f);
  fclose(f);
  for (size_t cut = 0; cut < n; ++cut) {
    write_bytes(p, good, cut);
    hali_status_t s = hali_param_set_add_file(set, "m", p);
    ck_assert_msg(s != NULL, "a %zu-byte prefix was accepted", cut);
    ck_assert_msg(hali_status_code(s) == HALI_STATUS_DATA_LOSS ||
                      hali_status_code(s) == HALI_STATUS_OUT_OF_RANGE,
                  "prefix %zu: %s", cut, hali_status_message(s));
    hali_status_free(s);
  }
  write_bytes(p, good, 20);
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   "runs past the end of the file (20 bytes)");
  write_bytes(p, good, n);
  ck_assert_ok(hali_param_set_add_file(set, "m", p));
}
END_TEST

/* A header length above the reference reader's 100 MB limit (in a sparse
 * file long enough to hold it). */
START_TEST(st_header_too_long) {
  const char *p = tmp("long.safetensors");
  FILE *f = fopen(p, "wb");
  ck_assert_ptr_nonnull(f);
  uint64_t n = 100u * 1000u * 1000u + 1;
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = (uint8_t)(n >> (8 * i));
  fwrite(len, 1, 8, f);
  fputc('{', f);
  ck_assert_int_eq(fclose(f), 0);
  ck_assert_int_eq(truncate(p, (off_t)(8 + n)), 0);
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   "the header length 100000001 is above 100000000");
}
END_TEST

START_TEST(st_bad_files) {
  ck_assert_status(hali_param_set_add_file(set, "m", tmp("none.safetensors")),
                   HALI_STATUS_NOT_FOUND, "none.safetensors: cannot open: No "
                                          "such file or directory");
  write_two(tmp("m.bin"), 0);
  ck_assert_status(hali_param_set_add_file(set, "m", tmp("m.bin")),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "unknown parameter file format (expected a .safetensors "
                   "or .npy file)");
  ck_assert_status(hali_param_set_add_file(set, "m", "/tmp/.safetensors/"),
                   HALI_STATUS_INVALID_ARGUMENT, "unknown parameter file");
  char dir[600];
  snprintf(dir, sizeof(dir), "%s", tmp("d.npy"));
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  ck_assert_status(hali_param_set_add_file(set, "m", dir),
                   HALI_STATUS_INVALID_ARGUMENT, "not a regular file");
  rmdir(dir);
  /* A FIFO neither hangs the open nor is read. */
  ck_assert_int_eq(mkfifo(tmp("p.safetensors"), 0600), 0);
  ck_assert_status(hali_param_set_add_file(set, "m", tmp("p.safetensors")),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "p.safetensors: not a regular file");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* .npy */

START_TEST(npy_alias_and_copy) {
  static const double v[3] = {0.5, -1e300, 3.0};
  const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  write_npy(tmp("aligned.npy"), dict, 0, v, sizeof(v));
  write_npy(tmp("odd.npy"), dict, 16, v, sizeof(v));
  ck_assert_ok(hali_param_set_add_file(set, "w", tmp("aligned.npy")));
  ck_assert_ok(hali_param_set_add_file(set, "w", tmp("odd.npy")));
  int64_t d3[] = {3};
  hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_64, 1, d3);
  hali_hal_buffer_t *a = NULL, *b = NULL;
  ck_assert_ok(hali_param_set_load(set, "w", "aligned", &t, allocator, &a));
  ck_assert_ok(hali_param_set_load(set, "w", "odd", &t, allocator, &b));
  expect_bytes(a, v, sizeof(v));
  expect_bytes(b, v, sizeof(v));
  ck_assert(aliases_mapping(a, "w", "aligned"));
  ck_assert(!aliases_mapping(b, "w", "odd"));
  hali_param_info_t info;
  ck_assert_ok(hali_param_set_find(set, "w", "odd", &info));
  ck_assert_str_eq(info.dtype, "<f8");
  ck_assert_uint_eq(info.offset % 64, 16);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  /* The key is the file name: a second "aligned.npy" elsewhere in the
   * scope collides. */
  char sub[600];
  snprintf(sub, sizeof(sub), "%s", tmp("sub"));
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  char again[700];
  snprintf(again, sizeof(again), "%s/aligned.npy", sub);
  write_npy(again, dict, 0, v, sizeof(v));
  ck_assert_status(hali_param_set_add_file(set, "w", again),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "parameter 'w'::'aligned' is already in");
  /* Shape and type are checked as for safetensors. */
  int64_t d4[] = {4};
  t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_64, 1, d4);
  ck_assert_status(hali_param_set_load(set, "w", "aligned", &t, allocator, &a),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "declared tensor<4xf64>, the file holds 3xf64 (dtype <f8)");
  unlink(again);
  rmdir(sub);
}
END_TEST

START_TEST(npy_corrupt) {
  const char *p = tmp("c.npy");
  write_bytes(p, "\x93NUMPX\x01\x00\x00\x00", 10);
  hali_status_t s = hali_param_set_add_file(set, "m", p);
  ck_assert_ptr_nonnull(s);
  ck_assert(strstr(hali_status_message(s), p) != NULL);
  ck_assert_status(s, HALI_STATUS_DATA_LOSS,
                   "not a valid .npy file: bad magic");
  int32_t x[2] = {1, 2};
  write_npy(p, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 0,
            x, sizeof(x));
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   ".npy data is 8 bytes but the shape needs 12");
  write_npy(p, "{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", 0,
            x, sizeof(x));
  ck_assert_status(hali_param_set_add_file(set, "m", p), HALI_STATUS_DATA_LOSS,
                   "only C order");
  ck_assert_uint_eq(hali_param_set_file_count(set), 0);
}
END_TEST

/* The public reader: the same header, INVALID_ARGUMENT for the tool. */
START_TEST(npy_public_parse) {
  int16_t x[6] = {1, 2, 3, 4, 5, 6};
  write_npy(tmp("p.npy"),
            "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }", 0,
            x, sizeof(x));
  FILE *f = fopen(tmp("p.npy"), "rb");
  uint8_t buf[512];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  hali_npy_info_t info;
  ck_assert_ok(hali_npy_parse(buf, n, "p.npy", &info));
  ck_assert_uint_eq(info.element_type, HALI_ELEMENT_TYPE_I16);
  ck_assert_uint_eq(info.rank, 2);
  ck_assert_int_eq(info.shape[0], 2);
  ck_assert_int_eq(info.shape[1], 3);
  ck_assert_uint_eq(info.data_offset, n - sizeof(x));
  ck_assert_uint_eq(info.data_offset % 64, 0);
  ck_assert_uint_eq(info.data_length, 12);
  ck_assert_mem_eq(buf + info.data_offset, x, sizeof(x));
  ck_assert_status(hali_npy_parse(buf, 9, "p.npy", &info),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "p.npy: not a valid .npy file: bad magic");
  ck_assert_status(hali_npy_parse(buf, n, "p.npy", NULL),
                   HALI_STATUS_INVALID_ARGUMENT, "out_info");
  ck_assert_str_eq(hali_npy_descr(HALI_ELEMENT_TYPE_F32), "f4");
  ck_assert_str_eq(hali_npy_descr(HALI_ELEMENT_TYPE_SI16), "i2");
  ck_assert_str_eq(hali_npy_descr(HALI_ELEMENT_TYPE_BF16), "V2");
  ck_assert_ptr_null(hali_npy_descr(0x12345678u));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The public API. */

static const char *mod_text = "module @m\nfunc @main() -> i32 {\n"
                              "  %x = const.i32 7\n  return %x\n}\n";

START_TEST(api_parameters_and_context) {
  write_two(tmp("m.safetensors"), 0);
  hali_parameters_t *p = NULL;
  ck_assert_ok(hali_parameters_create(&p));
  ck_assert_uint_eq(hali_parameters_file_count(p), 0);
  ck_assert_ok(hali_parameters_add_file(p, "model", tmp("m.safetensors")));
  ck_assert_ok(hali_parameters_add_file(p, "model2", tmp("m.safetensors")));
  ck_assert_uint_eq(hali_parameters_file_count(p), 2);
  ck_assert_status(hali_parameters_add_file(p, "x", tmp("no.npy")),
                   HALI_STATUS_NOT_FOUND, "no.npy: cannot open");
  ck_assert_status(hali_parameters_add_file(NULL, "x", "y"),
                   HALI_STATUS_INVALID_ARGUMENT, "parameters");
  ck_assert_status(hali_parameters_add_file(p, NULL, "y"),
                   HALI_STATUS_INVALID_ARGUMENT, "scope");
  ck_assert_status(hali_parameters_add_file(p, "x", NULL),
                   HALI_STATUS_INVALID_ARGUMENT, "path");
  ck_assert_status(hali_parameters_create(NULL), HALI_STATUS_INVALID_ARGUMENT,
                   "out_parameters");
  /* NULL is no parameters. */
  ck_assert_uint_eq(hali_parameters_file_count(NULL), 0);
  hali_parameters_retain(NULL);
  hali_parameters_release(NULL);

  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(NULL, &in));
  hali_device_t *dev = NULL;
  ck_assert_ok(hali_device_create(in, NULL, &dev));
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_bytes(in, mod_text, strlen(mod_text), "m",
                                      &m));
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  ck_assert_ptr_null(cp.parameters);
  cp.parameters = p;
  hali_context_t *c = NULL;
  ck_assert_ok(hali_context_create(in, dev, &m, 1, &cp, &c));
  /* The context holds the set; the caller's reference may go. */
  ck_assert_ptr_eq(c->params, p->set);
  ck_assert_status(hali_parameters_add_file(p, "late", tmp("m.safetensors")),
                   HALI_STATUS_FAILED_PRECONDITION,
                   "a context was created with these parameters");
  hali_parameters_release(p);
  hali_param_info_t info;
  ck_assert_ok(hali_param_set_find(c->params, "model", "w", &info));
  ck_assert_mem_eq(info.data, w23, sizeof(w23));
  hali_context_release(c);
  /* Without parameters a context has no set. */
  ck_assert_ok(hali_context_create(in, dev, &m, 1, NULL, &c));
  ck_assert_ptr_null(c->params);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

/* An instance's default_context_params keep their parameters alive. */
START_TEST(api_instance_defaults) {
  write_two(tmp("m.safetensors"), 0);
  hali_parameters_t *p = NULL;
  ck_assert_ok(hali_parameters_create(&p));
  ck_assert_ok(hali_parameters_add_file(p, "d", tmp("m.safetensors")));
  hali_instance_options_t o;
  hali_instance_options_initialize(&o);
  o.default_context_params.parameters = p;
  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(&o, &in));
  hali_parameters_release(p);
  hali_device_t *dev = NULL;
  ck_assert_ok(hali_device_create(in, NULL, &dev));
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_bytes(in, mod_text, strlen(mod_text), "m",
                                      &m));
  hali_context_t *c = NULL;
  ck_assert_ok(hali_context_create(in, dev, &m, 1, NULL, &c));
  ck_assert_ptr_nonnull(c->params);
  hali_param_info_t info;
  ck_assert_ok(hali_param_set_find(c->params, "d", "n", &info));
  ck_assert_mem_eq(info.data, i4, sizeof(i4));
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

static int run_tool(const char *args, char **out, char **err);

/* ------------------------------------------------------------------------ */
/* The flagship's weights */

/* examples/mlp.safetensors (written by examples/mlp_params.c) holds the
 * rodata of examples/mlp.hasm (written by examples/mlp_gen.py), bit for
 * bit, and every tensor is used in place. */
START_TEST(flagship_weights_match_rodata) {
  hali_ir_module_t *ir = NULL;
  ck_assert_ok(hali_load_file(HALI_SRCDIR "/examples/mlp.hasm", &ir));
  ck_assert_ok(hali_param_set_add_file(
      set, "model", HALI_BUILDDIR "/examples/mlp.safetensors"));
  const char *names[] = {"w1", "b1", "w2", "b2", "input"};
  for (size_t i = 0; i < 5; ++i) {
    const hali_ir_rodata_t *r = NULL;
    for (uint32_t k = 0; k < ir->rodata_count; ++k)
      if (strcmp(ir->rodata[k].name, names[i]) == 0) r = &ir->rodata[k];
    ck_assert_ptr_nonnull(r);
    int64_t n[] = {(int64_t)(r->size / 4)};
    hali_ir_xtype_t t = tensor_type(HALI_HAL_ELEMENT_TYPE_FLOAT_32, 1, n);
    hali_hal_buffer_t *b = NULL;
    ck_assert_ok(hali_param_set_load(set, "model", names[i], &t, allocator,
                                     &b));
    ck_assert(aliases_mapping(b, "model", names[i]));
    ck_assert_uint_eq(hali_hal_buffer_length(b), r->size);
    void *p = NULL;
    ck_assert_ok(hali_hal_buffer_map_range(b, 0, r->size, &p));
    ck_assert_mem_eq(p, r->data, r->size);
    hali_hal_buffer_release(b);
  }
  hali_ir_module_free(ir);
}
END_TEST

/* `hali run examples/mlp_tensor.hasm --parameters=...` (the README's
 * command) prints what `hali run examples/mlp.hasm` prints, byte for byte;
 * without the file it fails naming the scope and the global. */
START_TEST(flagship_cli_same_logits) {
  char *want = NULL, *got = NULL, *err = NULL;
  ck_assert_int_eq(run_tool(HALI_SRCDIR "/examples/mlp.hasm", &want, &err), 0);
  free(err);
  ck_assert_int_eq(
      run_tool(HALI_SRCDIR "/examples/mlp_tensor.hasm "
                           "--parameters=model=" HALI_BUILDDIR
                           "/examples/mlp.safetensors",
               &got, &err),
      0);
  ck_assert_str_eq(err, "");
  ck_assert_ptr_nonnull(strstr(want, "10xf32="));
  ck_assert_str_eq(got, want);
  free(got);
  free(err);
  /* The HAL trace shows each parameter wrapped in place, and no buffer of
   * a weight's size allocated (a copy would be). */
  ck_assert_int_eq(
      run_tool(HALI_SRCDIR "/examples/mlp_tensor.hasm --trace=hal "
                           "--parameters=model=" HALI_BUILDDIR
                           "/examples/mlp.safetensors",
               &got, &err),
      0);
  ck_assert_ptr_nonnull(
      strstr(err, "[hal] constant parameter model::w1 32768 bytes -> "));
  ck_assert_ptr_nonnull(
      strstr(err, "[hal] constant parameter model::b2 40 bytes -> "));
  ck_assert_ptr_null(strstr(err, "allocate 32768 bytes"));
  ck_assert_ptr_null(strstr(err, "allocate 5120 bytes"));
  free(got);
  free(err);
  ck_assert_int_eq(run_tool(HALI_SRCDIR "/examples/mlp_tensor.hasm", &got,
                            &err),
                   1);
  ck_assert_ptr_nonnull(strstr(
      err, "NOT_FOUND: no parameters bound for scope 'model' (global @w1 = "
           "parameter \"model\" :: \"w1\" of module @mlp_tensor)"));
  free(got);
  free(err);
  free(want);
}
END_TEST

/* In a context, every parameter global holds a buffer that aliases the
 * file's mapping: the weights are not copied, not at creation and not by
 * a call. */
START_TEST(flagship_context_aliases) {
  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(NULL, &in));
  hali_device_t *dev = NULL;
  ck_assert_ok(hali_device_create(in, NULL, &dev));
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_file(
      in, HALI_SRCDIR "/examples/mlp_tensor.hasm", &m));
  hali_parameters_t *p = NULL;
  ck_assert_ok(hali_parameters_create(&p));
  ck_assert_ok(hali_parameters_add_file(
      p, "model", HALI_BUILDDIR "/examples/mlp.safetensors"));
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  cp.parameters = p;
  hali_context_t *c = NULL;
  ck_assert_ok(hali_context_create(in, dev, &m, 1, &cp, &c));
  hali_parameters_release(p);
  const hali_ir_module_t *ir = c->modules[0].vm->ir;
  hali_vm_globals_t *g = c->modules[0].link->globals;
  int params = 0;
  for (uint32_t i = 0; i < ir->global_count; ++i) {
    if (!(ir->globals[i].flags & HALI_GLOBAL_PARAMETER)) continue;
    params++;
    hali_hal_buffer_t *b = (hali_hal_buffer_t *)g->refs[i];
    ck_assert_ptr_nonnull(b);
    hali_param_info_t info;
    ck_assert_ok(hali_param_set_find(c->params, ir->globals[i].param_scope,
                                     ir->globals[i].param_key, &info));
    void *ptr = NULL;
    ck_assert_ok(hali_hal_buffer_map_range(b, 0, HALI_HAL_WHOLE_BUFFER, &ptr));
    ck_assert_ptr_eq(ptr, info.data);
  }
  ck_assert_int_eq(params, 5);
  hali_function_t *fn = NULL;
  ck_assert_ok(hali_context_lookup_function(c, "main", &fn));
  hali_variant_t r;
  ck_assert_ok(hali_context_invoke(c, fn, NULL, 0, &r, 1));
  float logits[10];
  ck_assert_ok(hali_buffer_view_read(r.u.view, logits, sizeof(logits)));
  hali_variant_release(&r);
  /* The weights are still the file's bytes (nothing wrote to them). */
  hali_param_info_t w1;
  ck_assert_ok(hali_param_set_find(c->params, "model", "w1", &w1));
  hali_ir_module_t *text = NULL;
  ck_assert_ok(hali_load_file(HALI_SRCDIR "/examples/mlp.hasm", &text));
  for (uint32_t k = 0; k < text->rodata_count; ++k)
    if (strcmp(text->rodata[k].name, "w1") == 0)
      ck_assert_mem_eq(w1.data, text->rodata[k].data, text->rodata[k].size);
  hali_ir_module_free(text);
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

/* A declaration that does not match the file fails context creation,
 * naming the global, the module, scope, key, file and both shapes. */
START_TEST(context_parameter_mismatch) {
  static const char text[] =
      "module @bad\n"
      "global @w : tensor<3x2xf32> = parameter \"m\" :: \"w\"\n"
      "func @main() -> tensor<3x2xf32> {\n"
      "  %v = tensor.global.load @w\n"
      "  return %v\n"
      "}\n";
  write_two(tmp("m.safetensors"), 0);
  hali_instance_t *in = NULL;
  ck_assert_ok(hali_instance_create(NULL, &in));
  hali_device_t *dev = NULL;
  ck_assert_ok(hali_device_create(in, NULL, &dev));
  hali_module_t *m = NULL;
  ck_assert_ok(hali_module_load_bytes(in, text, strlen(text), "bad", &m));
  hali_parameters_t *p = NULL;
  ck_assert_ok(hali_parameters_create(&p));
  ck_assert_ok(hali_parameters_add_file(p, "m", tmp("m.safetensors")));
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  cp.parameters = p;
  hali_context_t *c = NULL;
  hali_status_t s = hali_context_create(in, dev, &m, 1, &cp, &c);
  ck_assert_ptr_null(c);
  char *full = hali_status_to_string(s);
  ck_assert_ptr_nonnull(strstr(full, "global @w = parameter \"m\" :: \"w\" "
                                     "of module @bad"));
  ck_assert_ptr_nonnull(strstr(full, tmp("m.safetensors")));
  free(full);
  ck_assert_status(s, HALI_STATUS_INVALID_ARGUMENT,
                   "the shape differs: declared tensor<3x2xf32>, the file "
                   "holds 2x3xf32 (dtype F32)");
  /* The matching declaration runs and returns the file's numbers. */
  static const char good[] =
      "module @good\n"
      "global @w : tensor<2x3xf32> = parameter \"m\" :: \"w\"\n"
      "func @main() -> tensor<2x3xf32> {\n"
      "  %v = tensor.global.load @w\n"
      "  return %v\n"
      "}\n";
  hali_module_t *m2 = NULL;
  ck_assert_ok(hali_module_load_bytes(in, good, strlen(good), "good", &m2));
  ck_assert_ok(hali_context_create(in, dev, &m2, 1, &cp, &c));
  hali_function_t *fn = NULL;
  ck_assert_ok(hali_context_lookup_function(c, "main", &fn));
  hali_variant_t r;
  ck_assert_ok(hali_context_invoke(c, fn, NULL, 0, &r, 1));
  float got[6];
  ck_assert_ok(hali_buffer_view_read(r.u.view, got, sizeof(got)));
  ck_assert_mem_eq(got, w23, sizeof(got));
  hali_variant_release(&r);
  hali_context_release(c);
  hali_parameters_release(p);
  hali_module_release(m2);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

/* After stream-to-hal a parameter global is a !hal.buffer that keeps the
 * tensor type its file is checked against; the printed form says so and
 * reads back (hali dis --after=all output reassembles). */
START_TEST(lowered_parameter_global_text) {
  static const char good[] =
      "module @l\n"
      "global @w : !hal.buffer = parameter \"m\" :: \"w\" : tensor<2x3xf32>\n";
  hali_ir_module_t *m = NULL;
  ck_assert_ok(hali_asm_parse(good, strlen(good), "l.hasm", &m));
  ck_assert_uint_eq(m->global_count, 1);
  ck_assert_uint_eq(m->globals[0].type, HALI_TYPE_BUFFER);
  ck_assert(m->globals[0].flags & HALI_GLOBAL_PARAMETER);
  ck_assert_uint_eq(m->globals[0].xtype.element_type,
                    HALI_HAL_ELEMENT_TYPE_FLOAT_32);
  ck_assert_uint_eq(m->globals[0].xtype.rank, 2);
  char *text = hali_ir_print(m, false);
  ck_assert_ptr_nonnull(strstr(text, "global @w : !hal.buffer = parameter "
                                     "\"m\" :: \"w\" : tensor<2x3xf32>\n"));
  free(text);
  hali_ir_module_free(m);
  static const char untyped[] =
      "global @w : !hal.buffer = parameter \"m\" :: \"w\"\n";
  ck_assert_status(hali_asm_parse(untyped, strlen(untyped), "l.hasm", &m),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "expected ':' before the parameter's tensor type");
  static const char scalar[] =
      "global @w : !hal.buffer = parameter \"m\" :: \"w\" : i32\n";
  ck_assert_status(hali_asm_parse(scalar, strlen(scalar), "l.hasm", &m),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "expected the parameter's tensor type");
  /* Other ref globals still take no initial value. */
  static const char fence[] =
      "global @f : !hal.fence = parameter \"m\" :: \"w\" : tensor<4xf32>\n";
  ck_assert_status(hali_asm_parse(fence, strlen(fence), "l.hasm", &m),
                   HALI_STATUS_INVALID_ARGUMENT,
                   "a ref global starts null and takes no initial value");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* hali run --parameters */

/* Runs the tool with |args|; returns its exit code, stdout and stderr in
 * |out| / |err| (freed by the caller). */
static int run_tool(const char *args, char **out, char **err) {
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "%s run %s", HALI_TOOL, args);
  return hali_test_shell(cmd, out, err);
}

START_TEST(cli_parameters) {
  FILE *f = fopen(tmp("m.hasm"), "w");
  fputs(mod_text, f);
  fclose(f);
  write_two(tmp("m.safetensors"), 0);
  write_bytes(tmp("bad.safetensors"), "\x05\0\0\0\0\0\0\0{\"a\":", 13);
  char args[2048], *out = NULL, *err = NULL;
  /* Bound files load (and a module without parameter globals runs). */
  snprintf(args, sizeof(args), "%s --parameters=model=%s --parameters=%s",
           tmp("m.hasm"), tmp("m.safetensors"), tmp("m.safetensors"));
  ck_assert_int_eq(run_tool(args, &out, &err), 0);
  ck_assert_str_eq(out, "result[0]: i32=7\n");
  free(out);
  free(err);
  /* A file that cannot be opened: the flag, the path and why. */
  snprintf(args, sizeof(args), "%s --parameters=model=%s", tmp("m.hasm"),
           tmp("none.safetensors"));
  ck_assert_int_eq(run_tool(args, &out, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "NOT_FOUND"));
  ck_assert_ptr_nonnull(strstr(err, "none.safetensors: cannot open"));
  ck_assert_ptr_nonnull(strstr(err, "--parameters=model="));
  ck_assert_ptr_nonnull(strstr(err, "scope 'model'"));
  ck_assert_str_eq(out, "");
  free(out);
  free(err);
  /* A corrupt one. */
  snprintf(args, sizeof(args), "%s --parameters=w=%s", tmp("m.hasm"),
           tmp("bad.safetensors"));
  ck_assert_int_eq(run_tool(args, &out, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "DATA_LOSS"));
  ck_assert_ptr_nonnull(strstr(err, "bad.safetensors: not a valid "
                                    ".safetensors file: bad JSON header"));
  free(out);
  free(err);
  /* Text before the first '=' is a scope only without a '/': this path
   * holds an '=' and goes to the scope "". */
  char odd[600];
  snprintf(odd, sizeof(odd), "%s", tmp("a=b.npy"));
  float one[1] = {4.0f};
  write_npy(odd, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            0, one, sizeof(one));
  snprintf(args, sizeof(args), "%s --parameters=%s", tmp("m.hasm"), odd);
  ck_assert_int_eq(run_tool(args, &out, &err), 0);
  free(out);
  free(err);
  /* ... while a scope's file that is not there is named with its scope. */
  snprintf(args, sizeof(args), "%s --parameters=a=%s", tmp("m.hasm"),
           tmp("b.npy"));
  ck_assert_int_eq(run_tool(args, &out, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "scope 'a'"));
  ck_assert_ptr_nonnull(strstr(err, "b.npy: cannot open"));
  free(out);
  free(err);
  /* The same key twice in one scope. */
  snprintf(args, sizeof(args), "%s --parameters=s=%s --parameters=s=%s",
           tmp("m.hasm"), tmp("m.safetensors"), tmp("m.safetensors"));
  ck_assert_int_eq(run_tool(args, &out, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "parameter 's'::'w' is already in"));
  free(out);
  free(err);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Files numpy wrote (tests/params_numpy.test): MANIFEST lines "FILE KEY
 * TYPE DIM..." and, for each, FILE.KEY.raw with the bytes numpy holds. */

START_TEST(numpy_written) {
  const char *dir = getenv("HALI_PARAMS_NUMPY_DIR");
  ck_assert_ptr_nonnull(dir);
  char path[1024];
  snprintf(path, sizeof(path), "%s/MANIFEST", dir);
  FILE *mf = fopen(path, "r");
  ck_assert_ptr_nonnull(mf);
  char line[1024], last_file[256] = "";
  int checked = 0;
  while (fgets(line, sizeof(line), mf)) {
    char file[256], key[128], type[16];
    int used = 0;
    ck_assert_int_eq(sscanf(line, "%255s %127s %15s%n", file, key, type, &used),
                     3);
    int64_t dims[8];
    uint32_t rank = 0;
    const char *q = line + used;
    long long d;
    int k;
    while (rank < 8 && sscanf(q, "%lld%n", &d, &k) == 1) {
      dims[rank++] = d;
      q += k;
    }
    /* Lines of one file come together: each file is added once, under
     * its own name as the scope. */
    if (strcmp(file, last_file) != 0) {
      snprintf(path, sizeof(path), "%s/%s", dir, file);
      ck_assert_ok(hali_param_set_add_file(set, file, path));
      snprintf(last_file, sizeof(last_file), "%s", file);
    }
    hali_hal_element_type_t et = 0;
    ck_assert_ok(hali_hal_element_type_parse(type, strlen(type), &et));
    hali_ir_xtype_t t = tensor_type(et, rank, dims);
    hali_hal_buffer_t *b = NULL;
    ck_assert_ok(hali_param_set_load(set, file, key, &t, allocator, &b));
    snprintf(path, sizeof(path), "%s/%s.%s.raw", dir, file, key);
    FILE *rf = fopen(path, "rb");
    ck_assert_ptr_nonnull(rf);
    static uint8_t want[1 << 16], got[1 << 16];
    size_t n = fread(want, 1, sizeof(want), rf);
    fclose(rf);
    ck_assert_uint_eq(hali_hal_buffer_length(b), n);
    ck_assert_ok(hali_hal_buffer_read(b, 0, got, n));
    ck_assert_mem_eq(got, want, n);
    hali_hal_buffer_release(b);
    checked++;
  }
  fclose(mf);
  ck_assert_int_gt(checked, 0);
}
END_TEST

static Suite *suite_params(void) {
  Suite *s = suite_create("params");
  TCase *tc = tcase_create("safetensors");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, st_aligned_aliases);
  tcase_add_test(tc, st_misaligned_copies);
  tcase_add_test(tc, st_every_dtype);
  tcase_add_test(tc, st_type_and_shape_checks);
  tcase_add_test(tc, st_bool_and_f8);
  tcase_add_test(tc, st_not_found);
  tcase_add_test(tc, st_duplicate_across_files);
  tcase_add_test(tc, st_order_and_gaps);
  tcase_add_loop_test(tc, st_corrupt_header, 0,
                      (int)(sizeof(bad_headers) / sizeof(bad_headers[0])));
  tcase_add_test(tc, st_truncated);
  tcase_add_test(tc, st_header_too_long);
  tcase_add_test(tc, st_bad_files);
  suite_add_tcase(s, tc);
  tc = tcase_create("npy");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, npy_alias_and_copy);
  tcase_add_test(tc, npy_corrupt);
  tcase_add_test(tc, npy_public_parse);
  suite_add_tcase(s, tc);
  tc = tcase_create("api");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, api_parameters_and_context);
  tcase_add_test(tc, api_instance_defaults);
  tcase_add_test(tc, cli_parameters);
  tcase_add_test(tc, flagship_weights_match_rodata);
  tcase_add_test(tc, flagship_cli_same_logits);
  tcase_add_test(tc, flagship_context_aliases);
  tcase_add_test(tc, context_parameter_mismatch);
  tcase_add_test(tc, lowered_parameter_global_text);
  suite_add_tcase(s, tc);
  if (getenv("HALI_PARAMS_NUMPY_DIR")) {
    tc = tcase_create("numpy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, numpy_written);
    suite_add_tcase(s, tc);
  }
  return s;
}

int main(void) { return hali_test_main(suite_params()); }
