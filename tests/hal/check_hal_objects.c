/* HAL units that need no device: allocator, buffers, views, recording-time
 * validation of command buffers, semaphores, fences, executables. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/hal/hal_testutil.h"
#include "base/alloc.h"
#include "hal/buffer_impl.h"
#include "hal/command_list.h"

/* ---- allocator ---- */

START_TEST(test_allocator_statistics) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  hali_hal_buffer_t *a = hali_test_allocate(allocator, 100);
  hali_hal_buffer_t *b = hali_test_allocate(allocator, 28);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 128);
  ck_assert_uint_eq(st.bytes_peak, 128);
  ck_assert_uint_eq(st.allocation_count, 2);
  ck_assert_uint_eq(st.allocations_live, 2);
  hali_hal_buffer_release(a);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 28);
  ck_assert_uint_eq(st.bytes_peak, 128);
  ck_assert_uint_eq(st.allocations_live, 1);
  hali_hal_buffer_t *c = hali_test_allocate(allocator, 50);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 78);
  ck_assert_uint_eq(st.bytes_peak, 128);
  ck_assert_uint_eq(st.allocation_count, 3);
  /* Storage is 64-byte aligned and zeroed. */
  void *p = NULL;
  HALI_CK_OK(hali_hal_buffer_map_range(c, 0, HALI_HAL_WHOLE_BUFFER, &p));
  ck_assert_uint_eq((uintptr_t)p % HALI_HAL_ALLOCATOR_ALIGNMENT, 0);
  for (int i = 0; i < 50; ++i) ck_assert_uint_eq(((uint8_t *)p)[i], 0);
  hali_hal_buffer_release(b);
  hali_hal_buffer_release(c);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  ck_assert_uint_eq(st.allocations_live, 0);
  hali_hal_allocator_release(allocator);
}
END_TEST

START_TEST(test_allocator_limit) {
  hali_hal_allocator_params_t params = {.max_bytes = 1000};
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(&params, &allocator));
  hali_hal_buffer_t *a = hali_test_allocate(allocator, 600);
  hali_hal_buffer_t *b = NULL;
  HALI_CK_STATUS(hali_hal_allocator_allocate_buffer(
                     allocator, hali_test_host_params(), 500, &b),
                 HALI_STATUS_RESOURCE_EXHAUSTED, "allocating 500 bytes",
                 "limit of 1000 bytes", "600 bytes live");
  ck_assert_ptr_null(b);
  hali_hal_buffer_t *c = hali_test_allocate(allocator, 400); /* exactly fits */
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 1000);
  ck_assert_uint_eq(st.allocation_count, 2); /* the refused one is not */
  hali_hal_buffer_release(c);
  hali_hal_allocator_set_max_bytes(allocator, 0);
  c = hali_test_allocate(allocator, 5000);
  hali_hal_buffer_release(c);
  hali_hal_buffer_release(a);
  hali_hal_allocator_release(allocator);
}
END_TEST

/* Hook-counting memory for test_allocator_storage_cache. */
static int storage_hook_allocs, storage_hook_frees;
static void *storage_hook_alloc(void *user, size_t size, size_t alignment) {
  (void)user;
  ++storage_hook_allocs;
  return hali_aligned_alloc(alignment, size);
}
static void storage_hook_free(void *user, void *ptr, size_t size) {
  (void)user, (void)size;
  ++storage_hook_frees;
  hali_aligned_free(ptr);
}

/* Freed storage of up to 64 KiB is kept (4 blocks) for the next
 * allocation of the same rounded size, which sees it zeroed again; the
 * statistics count it freed; hooks and bigger blocks always go back. */
START_TEST(test_allocator_storage_cache) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_t *a = hali_test_allocate(allocator, 100);
  uint8_t *first = atomic_load(&a->storage);
  ck_assert_ptr_nonnull(first);
  memset(first, 0xAB, 100);
  hali_hal_buffer_release(a);
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  ck_assert_uint_eq(st.allocations_live, 0);
  /* Another size does not take it; the same rounded size does, zeroed. */
  hali_hal_buffer_t *other = hali_test_allocate(allocator, 5000);
  ck_assert_ptr_ne(atomic_load(&other->storage), first);
  a = hali_test_allocate(allocator, 90);
  ck_assert_ptr_eq(atomic_load(&a->storage), first);
  for (int i = 0; i < 90; ++i) ck_assert_uint_eq(hali_test_byte(a, i), 0);
  for (int i = 90; i < 100; ++i) ck_assert_uint_eq(first[i], 0);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 5090);
  ck_assert_uint_eq(st.allocation_count, 3);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(other);
  hali_hal_buffer_t *many[6];
  /* A free into a full cache evicts the oldest block: the newer ones are
   * still handed out. */
  uint8_t *kept[5];
  for (int i = 0; i < 5; ++i) {
    hali_hal_buffer_t *x = hali_test_allocate(allocator, 256 * (i + 1));
    kept[i] = atomic_load(&x->storage);
    hali_hal_buffer_release(x);
  }
  for (int i = 4; i >= 1; --i) {
    hali_hal_buffer_t *x = hali_test_allocate(allocator, 256 * (i + 1));
    ck_assert_ptr_eq(atomic_load(&x->storage), kept[i]);
    many[i] = x;
  }
  for (int i = 1; i < 5; ++i) hali_hal_buffer_release(many[i]);
  /* More than the slots: the rest are freed (the leak checks see it). */
  for (int i = 0; i < 6; ++i) many[i] = hali_test_allocate(allocator, 64);
  for (int i = 0; i < 6; ++i) hali_hal_buffer_release(many[i]);
  hali_hal_buffer_t *big = hali_test_allocate(allocator, (64 << 10) + 1);
  hali_hal_buffer_release(big);
  hali_hal_allocator_release(allocator);

  hali_hal_allocator_params_t params = {
      .hooks = {storage_hook_alloc, storage_hook_free, NULL}};
  HALI_CK_OK(hali_hal_allocator_create(&params, &allocator));
  storage_hook_allocs = storage_hook_frees = 0;
  for (int i = 0; i < 3; ++i)
    hali_hal_buffer_release(hali_test_allocate(allocator, 100));
  ck_assert_int_eq(storage_hook_allocs, 3);
  ck_assert_int_eq(storage_hook_frees, 3);
  hali_hal_allocator_release(allocator);
}
END_TEST

/* Allocation sizes at the boundaries of the limit and of the address
 * space: the reservation arithmetic never wraps, and a refusal leaves the
 * statistics as they were. */
START_TEST(test_allocator_size_boundaries) {
  hali_hal_allocator_params_t params = {.max_bytes = 1000};
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(&params, &allocator));
  hali_hal_buffer_t *live = hali_test_allocate(allocator, 600);
  static const struct {
    uint64_t size;
    const char *error; /* RESOURCE_EXHAUSTED text; NULL: fits */
  } cases[] = {
      {0, NULL},
      {1, NULL},
      {399, NULL},
      {400, NULL},
      {401, "allocating 401 bytes would exceed the allocator limit of 1000 "
            "bytes (600 bytes live)"},
      {1000, "allocating 1000 bytes would exceed"},
      {1001, "allocating 1001 bytes would exceed"},
      /* 600 live + this would wrap past 2^64 to a small number. */
      {UINT64_MAX - 599, "would exceed the allocator limit"},
      {UINT64_MAX - 64, "would exceed the allocator limit"},
      /* Rounding up to 64 bytes would wrap: refused before any rounding. */
      {UINT64_MAX - 63, "allocation of 18446744073709551552 bytes exceeds "
                        "the host address space"},
      {UINT64_MAX, "allocation of 18446744073709551615 bytes exceeds the "
                   "host address space"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    hali_hal_buffer_t *b = NULL;
    hali_status_t s = hali_hal_allocator_allocate_buffer(
        allocator, hali_test_host_params(), cases[i].size, &b);
    if (!cases[i].error) {
      HALI_CK_OK(s);
      ck_assert_uint_eq(hali_hal_buffer_length(b), cases[i].size);
      hali_hal_buffer_release(b);
    } else {
      hali_test_check_status(s, HALI_STATUS_RESOURCE_EXHAUSTED, "allocate",
                             __FILE__, __LINE__,
                             (const char *const[]){cases[i].error, NULL});
      ck_assert_ptr_null(b);
    }
    hali_hal_allocator_statistics_t st;
    hali_hal_allocator_query_statistics(allocator, &st);
    ck_assert_uint_eq(st.bytes_live, 600);
    ck_assert_uint_eq(st.allocations_live, 1);
  }
  hali_hal_buffer_release(live);
  hali_hal_allocator_release(allocator);
}
END_TEST

START_TEST(test_allocator_bits) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_params_t params = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                      HALI_HAL_MEMORY_TYPE_TRANSIENT,
      .usage = HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_CONSTANT,
  };
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, params, 16, &buffer));
  ck_assert_uint_eq(hali_hal_buffer_memory_types(buffer), params.memory_types);
  ck_assert_uint_eq(hali_hal_buffer_usage(buffer), params.usage);
  ck_assert_uint_eq(hali_hal_buffer_length(buffer), 16);
  hali_hal_buffer_release(buffer);
  params.usage = 1u << 20;
  HALI_CK_STATUS(
      hali_hal_allocator_allocate_buffer(allocator, params, 16, &buffer),
      HALI_STATUS_INVALID_ARGUMENT, "usage bits 0x100000");
  params.usage = 0;
  params.memory_types = 1u << 9;
  HALI_CK_STATUS(
      hali_hal_allocator_allocate_buffer(allocator, params, 16, &buffer),
      HALI_STATUS_INVALID_ARGUMENT, "memory type bits 0x200");
  char text[128];
  ck_assert_str_eq(hali_hal_memory_type_bits_format(
                       HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                           HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
                       text, sizeof(text)),
                   "DEVICE_LOCAL|HOST_VISIBLE");
  ck_assert_str_eq(hali_hal_buffer_usage_bits_format(0, text, sizeof(text)),
                   "NONE");
  hali_hal_allocator_release(allocator);
}
END_TEST

/* ---- buffers ---- */

START_TEST(test_buffer_subspan) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_t *parent = hali_test_allocate(allocator, 64);
  uint8_t bytes[64];
  for (int i = 0; i < 64; ++i) bytes[i] = (uint8_t)i;
  HALI_CK_OK(hali_hal_buffer_write(parent, 0, bytes, 64));
  hali_hal_buffer_t *span = NULL, *inner = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(parent, 16, 32, &span));
  HALI_CK_OK(hali_hal_buffer_subspan(span, 8, HALI_HAL_WHOLE_BUFFER, &inner));
  ck_assert_uint_eq(hali_hal_buffer_length(span), 32);
  ck_assert_uint_eq(hali_hal_buffer_byte_offset(span), 16);
  ck_assert_uint_eq(hali_hal_buffer_length(inner), 24);
  ck_assert_uint_eq(hali_hal_buffer_byte_offset(inner), 24);
  ck_assert_ptr_eq(hali_hal_buffer_allocated_buffer(inner), parent);
  ck_assert_uint_eq(hali_test_byte(inner, 0), 24);
  /* Writes through a subspan alias the parent. */
  uint8_t x = 0xEE;
  HALI_CK_OK(hali_hal_buffer_write(inner, 1, &x, 1));
  ck_assert_uint_eq(hali_test_byte(parent, 25), 0xEE);
  /* Out-of-range subspans and accesses name the numbers. */
  hali_hal_buffer_t *bad = NULL;
  HALI_CK_STATUS(hali_hal_buffer_subspan(span, 30, 4, &bad),
                 HALI_STATUS_OUT_OF_RANGE, "offset 30", "length 4",
                 "buffer length 32");
  HALI_CK_STATUS(hali_hal_buffer_subspan(span, UINT64_MAX - 1, 4, &bad),
                 HALI_STATUS_OUT_OF_RANGE, "length 4");
  HALI_CK_STATUS(hali_hal_buffer_read(inner, 20, bytes, 5),
                 HALI_STATUS_OUT_OF_RANGE, "offset 20", "length 5",
                 "buffer length 24");
  /* The subspan keeps the allocation alive. */
  hali_hal_buffer_release(parent);
  hali_hal_buffer_release(span);
  ck_assert_uint_eq(hali_test_byte(inner, 1), 0xEE);
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 64);
  hali_hal_buffer_release(inner);
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  hali_hal_allocator_release(allocator);
}
END_TEST

START_TEST(test_buffer_mapping_rules) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_params_t device_only = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL,
      .usage = HALI_HAL_BUFFER_USAGE_ALL,
  };
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, device_only, 32, &buffer));
  void *p = NULL;
  HALI_CK_STATUS(hali_hal_buffer_map_range(buffer, 0, 32, &p),
                 HALI_STATUS_PERMISSION_DENIED, "not HOST_VISIBLE",
                 "DEVICE_LOCAL");
  uint8_t b = 0;
  HALI_CK_STATUS(hali_hal_buffer_read(buffer, 0, &b, 1),
                 HALI_STATUS_PERMISSION_DENIED, "HOST_VISIBLE");
  hali_hal_buffer_release(buffer);
  hali_hal_buffer_params_t no_mapping = {
      .memory_types = HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_TRANSFER,
  };
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, no_mapping, 32, &buffer));
  HALI_CK_STATUS(hali_hal_buffer_write(buffer, 0, &b, 1),
                 HALI_STATUS_PERMISSION_DENIED, "usage TRANSFER",
                 "required MAPPING");
  hali_hal_buffer_release(buffer);
  hali_hal_allocator_release(allocator);
}
END_TEST

START_TEST(test_buffer_uncommitted) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(hali_hal_buffer_create_uncommitted(
      allocator, hali_test_host_params(), 8, &buffer));
  ck_assert(!hali_hal_buffer_is_committed(buffer));
  uint8_t b = 0;
  HALI_CK_STATUS(hali_hal_buffer_read(buffer, 0, &b, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "not committed");
  HALI_CK_OK(hali_hal_buffer_commit(buffer));
  ck_assert(hali_hal_buffer_is_committed(buffer));
  HALI_CK_STATUS(hali_hal_buffer_commit(buffer),
                 HALI_STATUS_FAILED_PRECONDITION, "already committed");
  HALI_CK_OK(hali_hal_buffer_decommit(buffer));
  HALI_CK_STATUS(hali_hal_buffer_decommit(buffer),
                 HALI_STATUS_FAILED_PRECONDITION, "not committed");
  hali_hal_buffer_release(buffer);
  hali_hal_allocator_release(allocator);
}
END_TEST

/* The interpreter's inline scalar check (hal/buffer_impl.h) admits exactly
 * what hali_hal_buffer_scalar_ptr admits, at the same address: every size,
 * offsets around both ends and far out, over allocated, subspan,
 * uncommitted, read-only, device-only and unmappable buffers. */
START_TEST(test_buffer_scalar_fast_agrees) {
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  static uint8_t ro_bytes[24];
  hali_hal_buffer_t *b[8] = {0};
  b[0] = hali_test_allocate(allocator, 16);
  HALI_CK_OK(hali_hal_buffer_subspan(b[0], 3, 9, &b[1]));
  HALI_CK_OK(hali_hal_buffer_subspan(b[1], 2, HALI_HAL_WHOLE_BUFFER, &b[2]));
  HALI_CK_OK(hali_hal_buffer_create_uncommitted(
      allocator, hali_test_host_params(), 8, &b[3]));
  HALI_CK_OK(hali_hal_buffer_wrap_host(hali_test_host_params(), ro_bytes, 24,
                                       "test constants", NULL, NULL, &b[4]));
  HALI_CK_OK(hali_hal_buffer_subspan(b[4], 8, 8, &b[5]));
  hali_hal_buffer_params_t device_only = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL,
      .usage = HALI_HAL_BUFFER_USAGE_ALL};
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, device_only, 8, &b[6]));
  hali_hal_buffer_params_t no_mapping = {
      .memory_types = HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_TRANSFER};
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, no_mapping, 8, &b[7]));
  const int64_t offsets[] = {INT64_MIN, -9, -8, -1, 0, 1, 2, 5, 6, 7, 8,
                             9, 12, 15, 16, 17, 23, 24, 25, INT64_MAX - 7,
                             INT64_MAX};
  const uint32_t sizes[] = {1, 2, 4, 8};
  unsigned admitted = 0, refused = 0;
  for (size_t i = 0; i < sizeof b / sizeof b[0]; ++i)
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; ++o)
      for (size_t z = 0; z < 4; ++z)
        for (int w = 0; w < 2; ++w) {
          uint8_t *slow = NULL;
          hali_status_t s = hali_hal_buffer_scalar_ptr(b[i], offsets[o],
                                                       sizes[z], w, &slow);
          uint8_t *fast = hali_hal_buffer_scalar_fast(
              b[i], offsets[o], sizes[z],
              w ? HALI_HAL_SCALAR_STORE : HALI_HAL_SCALAR_LOAD);
          if (s) {
            ck_assert_msg(!fast, "buffer %zu offset %" PRId64 " size %u %s: "
                          "the inline check admits what the HAL refuses",
                          i, offsets[o], sizes[z], w ? "store" : "load");
            hali_status_free(s);
            refused++;
          } else {
            ck_assert_msg(fast == slow, "buffer %zu offset %" PRId64
                          " size %u %s: %p, the HAL says %p", i, offsets[o],
                          sizes[z], w ? "store" : "load", (void *)fast,
                          (void *)slow);
            admitted++;
          }
        }
  /* Both outcomes were exercised (the grid is not all one kind). */
  ck_assert_uint_gt(admitted, 100);
  ck_assert_uint_gt(refused, 100);
  /* Committing the uncommitted buffer admits it from then on. */
  ck_assert_ptr_null(hali_hal_buffer_scalar_fast(b[3], 0, 1,
                                                 HALI_HAL_SCALAR_LOAD));
  HALI_CK_OK(hali_hal_buffer_commit(b[3]));
  ck_assert_ptr_nonnull(hali_hal_buffer_scalar_fast(b[3], 7, 1,
                                                    HALI_HAL_SCALAR_STORE));
  for (size_t i = 0; i < sizeof b / sizeof b[0]; ++i)
    hali_hal_buffer_release(b[i]);
  hali_hal_allocator_release(allocator);
}
END_TEST

/* ---- buffer views ---- */

START_TEST(test_element_types) {
  static const struct {
    const char *name;
    hali_hal_element_type_t type;
    uint32_t code;
    uint32_t bytes;
  } cases[] = {
      {"i1", HALI_HAL_ELEMENT_TYPE_INT_1, 0x10000001u, 1},
      {"i8", HALI_HAL_ELEMENT_TYPE_INT_8, 0x10000008u, 1},
      {"i16", HALI_HAL_ELEMENT_TYPE_INT_16, 0x10000010u, 2},
      {"i32", HALI_HAL_ELEMENT_TYPE_INT_32, 0x10000020u, 4},
      {"i64", HALI_HAL_ELEMENT_TYPE_INT_64, 0x10000040u, 8},
      {"si8", HALI_HAL_ELEMENT_TYPE_SINT_8, 0x11000008u, 1},
      {"si16", HALI_HAL_ELEMENT_TYPE_SINT_16, 0x11000010u, 2},
      {"si32", HALI_HAL_ELEMENT_TYPE_SINT_32, 0x11000020u, 4},
      {"si64", HALI_HAL_ELEMENT_TYPE_SINT_64, 0x11000040u, 8},
      {"u8", HALI_HAL_ELEMENT_TYPE_UINT_8, 0x12000008u, 1},
      {"u16", HALI_HAL_ELEMENT_TYPE_UINT_16, 0x12000010u, 2},
      {"u32", HALI_HAL_ELEMENT_TYPE_UINT_32, 0x12000020u, 4},
      {"u64", HALI_HAL_ELEMENT_TYPE_UINT_64, 0x12000040u, 8},
      {"bool", HALI_HAL_ELEMENT_TYPE_BOOL_8, 0x13000008u, 1},
      {"f16", HALI_HAL_ELEMENT_TYPE_FLOAT_16, 0x21000010u, 2},
      {"f32", HALI_HAL_ELEMENT_TYPE_FLOAT_32, 0x21000020u, 4},
      {"f64", HALI_HAL_ELEMENT_TYPE_FLOAT_64, 0x21000040u, 8},
      {"bf16", HALI_HAL_ELEMENT_TYPE_BFLOAT_16, 0x22000010u, 2},
  };
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_t *buffer = hali_test_allocate(allocator, 2 * 3 * 8);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    ck_assert_uint_eq(cases[i].type, cases[i].code);
    ck_assert_str_eq(hali_hal_element_type_name(cases[i].type), cases[i].name);
    hali_hal_element_type_t parsed = 0;
    HALI_CK_OK(hali_hal_element_type_parse(cases[i].name,
                                           strlen(cases[i].name), &parsed));
    ck_assert_uint_eq(parsed, cases[i].type);
    ck_assert_uint_eq(hali_hal_element_type_byte_size(cases[i].type),
                      cases[i].bytes);
    const hali_hal_dim_t shape[2] = {2, 3};
    hali_hal_device_size_t size = 0;
    HALI_CK_OK(hali_hal_buffer_compute_view_size(
        2, shape, cases[i].type, HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
        &size));
    ck_assert_uint_eq(size, 6 * cases[i].bytes);
    hali_hal_buffer_view_t *view = NULL;
    HALI_CK_OK(hali_hal_buffer_view_create(
        buffer, 2, shape, cases[i].type,
        HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &view));
    ck_assert_uint_eq(hali_hal_buffer_view_rank(view), 2);
    ck_assert_int_eq(hali_hal_buffer_view_dim(view, 1), 3);
    ck_assert_uint_eq(hali_hal_buffer_view_element_count(view), 6);
    ck_assert_uint_eq(hali_hal_buffer_view_byte_length(view),
                      6 * cases[i].bytes);
    ck_assert_uint_eq(hali_hal_buffer_view_element_type(view), cases[i].type);
    ck_assert_ptr_eq(hali_hal_buffer_view_buffer(view), buffer);
    char text[64], expected[64];
    snprintf(expected, sizeof(expected), "2x3x%s", cases[i].name);
    ck_assert_str_eq(hali_hal_buffer_view_format_type(view, text, sizeof(text)),
                     expected);
    hali_hal_buffer_view_release(view);
  }
  hali_hal_element_type_t parsed = 0;
  HALI_CK_OK(hali_hal_element_type_parse("ui16", 4, &parsed));
  ck_assert_uint_eq(parsed, HALI_HAL_ELEMENT_TYPE_UINT_16);
  HALI_CK_STATUS(hali_hal_element_type_parse("f33", 3, &parsed),
                 HALI_STATUS_INVALID_ARGUMENT, "'f33'");
  ck_assert_ptr_null(hali_hal_element_type_name(0x21000018u));
  hali_hal_buffer_release(buffer);
  hali_hal_allocator_release(allocator);
}
END_TEST

START_TEST(test_view_size_errors) {
  hali_hal_device_size_t size = 0;
  /* Rank 0 is a scalar. */
  HALI_CK_OK(hali_hal_buffer_compute_view_size(
      0, NULL, HALI_HAL_ELEMENT_TYPE_FLOAT_64,
      HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size));
  ck_assert_uint_eq(size, 8);
  /* Element count overflow. */
  const hali_hal_dim_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 30, 2};
  HALI_CK_STATUS(hali_hal_buffer_compute_view_size(
                     3, huge, HALI_HAL_ELEMENT_TYPE_INT_8,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size),
                 HALI_STATUS_OUT_OF_RANGE, "element count overflows",
                 "dim 1");
  /* Byte size overflow: the count fits, times 8 bytes does not. */
  const hali_hal_dim_t big[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
  HALI_CK_STATUS(hali_hal_buffer_compute_view_size(
                     2, big, HALI_HAL_ELEMENT_TYPE_FLOAT_64,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size),
                 HALI_STATUS_OUT_OF_RANGE, "byte size overflows",
                 "4611686018427387904 elements of 8 bytes");
  const hali_hal_dim_t negative[2] = {4, -1};
  HALI_CK_STATUS(hali_hal_buffer_compute_view_size(
                     2, negative, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size),
                 HALI_STATUS_INVALID_ARGUMENT, "dim 1 is negative (-1)");
  HALI_CK_STATUS(hali_hal_buffer_compute_view_size(
                     2, big, 0x21000018u,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size),
                 HALI_STATUS_INVALID_ARGUMENT, "0x21000018");
  HALI_CK_STATUS(hali_hal_buffer_compute_view_size(
                     2, big, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                     HALI_HAL_ENCODING_TYPE_OPAQUE, &size),
                 HALI_STATUS_INVALID_ARGUMENT, "encoding type 0");
  /* A view larger than its buffer. */
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  hali_hal_buffer_t *buffer = hali_test_allocate(allocator, 15);
  const hali_hal_dim_t shape[1] = {4};
  hali_hal_buffer_view_t *view = NULL;
  HALI_CK_STATUS(hali_hal_buffer_view_create(
                     buffer, 1, shape, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &view),
                 HALI_STATUS_OUT_OF_RANGE, "needs 16 bytes",
                 "buffer has 15");
  hali_hal_buffer_release(buffer);
  hali_hal_allocator_release(allocator);
}
END_TEST

/* View sizes at the 64-bit boundary: dims multiply, then times the element
 * size; products of exactly 2^64 overflow, 2^64 - 8 does not. */
START_TEST(test_view_size_boundaries) {
  static const struct {
    size_t rank;
    hali_hal_dim_t dims[3];
    hali_hal_element_type_t type;
    uint64_t bytes;    /* when |error| is NULL */
    const char *error; /* OUT_OF_RANGE text */
  } cases[] = {
      {1, {0}, HALI_HAL_ELEMENT_TYPE_FLOAT_32, 0, NULL},
      {1, {1}, HALI_HAL_ELEMENT_TYPE_FLOAT_32, 4, NULL},
      {3, {0, INT64_MAX, INT64_MAX}, HALI_HAL_ELEMENT_TYPE_FLOAT_64, 0, NULL},
      {1, {INT64_MAX}, HALI_HAL_ELEMENT_TYPE_INT_8, (uint64_t)INT64_MAX, NULL},
      {2, {INT64_C(1) << 32, (INT64_C(1) << 32) - 1},
       HALI_HAL_ELEMENT_TYPE_INT_8, UINT64_MAX - UINT32_MAX, NULL},
      {1, {(INT64_C(1) << 61) - 1}, HALI_HAL_ELEMENT_TYPE_FLOAT_64,
       UINT64_MAX - 7, NULL}, /* 2^64 - 8 */
      /* 2^32 x 2^32 = 2^64 elements. */
      {2, {INT64_C(1) << 32, INT64_C(1) << 32}, HALI_HAL_ELEMENT_TYPE_INT_8, 0,
       "element count overflows 64 bits at dim 1 (4294967296 x 4294967296)"},
      {3, {2, INT64_MAX, 2}, HALI_HAL_ELEMENT_TYPE_INT_8, 0,
       "element count overflows 64 bits at dim 2 (18446744073709551614 x 2)"},
      /* 2^61 f64 = 2^64 bytes. */
      {1, {INT64_C(1) << 61}, HALI_HAL_ELEMENT_TYPE_FLOAT_64, 0,
       "byte size overflows 64 bits (2305843009213693952 elements of 8 "
       "bytes)"},
      /* Seed audit B3: 2^62 + 4 f32 elements would wrap to 16 bytes. */
      {1, {(INT64_C(1) << 62) + 4}, HALI_HAL_ELEMENT_TYPE_FLOAT_32, 0,
       "byte size overflows 64 bits (4611686018427387908 elements of 4 "
       "bytes)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    hali_hal_device_size_t size = 12345;
    hali_status_t s = hali_hal_buffer_compute_view_size(
        cases[i].rank, cases[i].dims, cases[i].type,
        HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &size);
    if (!cases[i].error) {
      char *text = s ? hali_status_to_string(s) : NULL;
      ck_assert_msg(!s, "case %zu: %s", i, text);
      ck_assert_uint_eq(size, cases[i].bytes);
      continue;
    }
    ck_assert_uint_eq(size, 0);
    hali_test_check_status(s, HALI_STATUS_OUT_OF_RANGE, "view size", __FILE__,
                           __LINE__, (const char *const[]){cases[i].error,
                                                           NULL});
  }
}
END_TEST

/* ---- executables ---- */

static int noop_kernel(const hali_kernel_dispatch_state_t *d,
                       const hali_kernel_workgroup_state_t *w) {
  return 0;
}

static const hali_kernel_export_t test_exports[] = {
    {"first", noop_kernel, 2, 1, {4, 1, 1}, 0},
    {"second", noop_kernel, 0, 0, {1, 1, 1}, 128},
};

/* Finalize runs the dispatch checks a replay would (so replays skip
 * them): a recording corrupted after the record-time checks is refused
 * at finalize, naming the command. */
START_TEST(test_finalize_checks_dispatches) {
  hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION, "lib", 2,
                                   test_exports};
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  for (int corrupt = 0; corrupt < 2; ++corrupt) {
    hali_hal_command_buffer_t *cb = NULL;
    HALI_CK_OK(hali_hal_command_buffer_create(
        HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
        &cb));
    HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
    HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 1, 2, 3, 4));
    if (corrupt) {
      /* The second record (after the barrier's header) is the dispatch;
       * reach it through the list's own bytes (the test owns |cb|). */
      const hali_hal_command_header_t *h = hali_hal_command_list_first(cb);
      ck_assert_ptr_nonnull(h);
      hali_hal_command_dispatch_t *d =
          (hali_hal_command_dispatch_t *)(void *)(cb->data + h->size);
      ck_assert_uint_eq(d->header.type, HALI_HAL_COMMAND_DISPATCH);
      d->workgroup_count[0] = UINT32_MAX;
      HALI_CK_STATUS(hali_hal_command_buffer_finalize(cb),
                     HALI_STATUS_OUT_OF_RANGE, "finalize",
                     "command 1 of 2", "exceeds the maximum");
      ck_assert(!cb->dispatches_checked);
      ck_assert(!hali_hal_command_buffer_is_finalized(cb));
    } else {
      HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
      ck_assert(cb->dispatches_checked);
    }
    hali_hal_command_buffer_release(cb);
  }
  hali_hal_executable_release(exe);
}
END_TEST

START_TEST(test_executable_from_library) {
  hali_kernel_library_t library = {HALI_KERNEL_ABI_VERSION, "lib", 2,
                                   test_exports};
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&library, NULL, &exe));
  ck_assert_str_eq(hali_hal_executable_name(exe), "lib");
  ck_assert_str_eq(hali_hal_executable_format(exe), "static");
  ck_assert_uint_eq(hali_hal_executable_export_count(exe), 2);
  ck_assert_str_eq(hali_hal_executable_export(exe, 1)->name, "second");
  ck_assert_uint_eq(hali_hal_executable_export(exe, 0)->binding_count, 2);
  ck_assert_ptr_null(hali_hal_executable_export(exe, 2));
  /* The queue calls a table's kernels directly. */
  ck_assert_ptr_eq(hali_hal_executable_direct_kernel(exe, 1), noop_kernel);
  ck_assert_ptr_null(hali_hal_executable_direct_kernel(exe, 2));
  hali_kernel_workgroup_state_t wg = {.workgroup_id_x = 3};
  HALI_CK_STATUS(hali_hal_executable_kernel_error(exe, 1, 7, &wg),
                 HALI_STATUS_INTERNAL,
                 "kernel returned error code 7: executable 'lib' export 1 "
                 "'second' workgroup (3,0,0)");
  uint32_t ordinal = 9;
  HALI_CK_OK(hali_hal_executable_lookup_export(exe, "second", &ordinal));
  ck_assert_uint_eq(ordinal, 1);
  HALI_CK_STATUS(hali_hal_executable_lookup_export(exe, "third", &ordinal),
                 HALI_STATUS_NOT_FOUND, "'lib'", "'third'");
  hali_hal_executable_release(exe);

  library.abi_version = 99;
  HALI_CK_STATUS(hali_hal_executable_create_from_library(&library, NULL, &exe),
                 HALI_STATUS_INVALID_ARGUMENT, "ABI version 99");
  hali_kernel_export_t bad[1] = {{"k", NULL, 0, 0, {1, 1, 1}, 0}};
  hali_kernel_library_t bad_library = {HALI_KERNEL_ABI_VERSION, "bad", 1, bad};
  HALI_CK_STATUS(
      hali_hal_executable_create_from_library(&bad_library, NULL, &exe),
      HALI_STATUS_INVALID_ARGUMENT, "export 0 'k' has no function");
  bad[0].fn = noop_kernel;
  bad[0].workgroup_size[1] = 0;
  HALI_CK_STATUS(
      hali_hal_executable_create_from_library(&bad_library, NULL, &exe),
      HALI_STATUS_INVALID_ARGUMENT, "workgroup size 1x0x1");
  bad[0].workgroup_size[1] = 1;
  bad[0].binding_count = 33;
  HALI_CK_STATUS(
      hali_hal_executable_create_from_library(&bad_library, NULL, &exe),
      HALI_STATUS_INVALID_ARGUMENT, "33 bindings");
}
END_TEST

/* ---- command buffer recording ---- */

typedef struct recording_fixture_t {
  hali_hal_allocator_t *allocator;
  hali_hal_buffer_t *buffer; /* 64 bytes, every usage */
  hali_hal_command_buffer_t *cb;
  hali_hal_executable_t *exe;
} recording_fixture_t;

static recording_fixture_t rf;
static const hali_kernel_library_t test_library = {HALI_KERNEL_ABI_VERSION,
                                                   "lib", 2, test_exports};

static void recording_setup(void) {
  HALI_CK_OK(hali_hal_allocator_create(NULL, &rf.allocator));
  rf.buffer = hali_test_allocate(rf.allocator, 64);
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_ANY,
      &rf.cb));
  HALI_CK_OK(hali_hal_executable_create_from_library(&test_library, NULL,
                                                     &rf.exe));
}

static void recording_teardown(void) {
  hali_hal_executable_release(rf.exe);
  hali_hal_command_buffer_release(rf.cb);
  hali_hal_buffer_release(rf.buffer);
  hali_hal_allocator_release(rf.allocator);
}

START_TEST(test_record_fill_validation) {
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 0, 8, 0, 3),
                 HALI_STATUS_INVALID_ARGUMENT, "pattern length 3");
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 2, 8, 0, 4),
                 HALI_STATUS_INVALID_ARGUMENT, "offset 2", "length 8",
                 "pattern length 4");
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 4, 6, 0, 4),
                 HALI_STATUS_INVALID_ARGUMENT, "length 6");
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 60, 8, 0, 4),
                 HALI_STATUS_OUT_OF_RANGE, "fill target", "offset 60",
                 "length 8", "buffer length 64");
  /* offset + length wraps around 2^64: still rejected. */
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer,
                                              UINT64_MAX - 3, 8, 0, 4),
                 HALI_STATUS_OUT_OF_RANGE, "length 8");
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb), 0);
  hali_hal_buffer_params_t dispatch_only = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL,
      .usage = HALI_HAL_BUFFER_USAGE_DISPATCH,
  };
  hali_hal_buffer_t *b = NULL;
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(rf.allocator, dispatch_only, 16, &b));
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, b, 0, 16, 0, 1),
                 HALI_STATUS_PERMISSION_DENIED, "fill target",
                 "required TRANSFER");
  HALI_CK_STATUS(hali_hal_command_buffer_update(rf.cb, "xx", b, 0, 2),
                 HALI_STATUS_PERMISSION_DENIED, "update target");
  HALI_CK_STATUS(hali_hal_command_buffer_copy(rf.cb, rf.buffer, 0, b, 0, 4),
                 HALI_STATUS_PERMISSION_DENIED, "copy target");
  hali_hal_buffer_release(b);
  HALI_CK_OK(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 2, 6, 0x1FFFF, 2));
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb), 1);
}
END_TEST

START_TEST(test_record_copy_validation) {
  hali_hal_buffer_t *a = NULL, *b = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(rf.buffer, 0, 32, &a));
  HALI_CK_OK(hali_hal_buffer_subspan(rf.buffer, 16, 32, &b));
  /* a[8..24) is parent [8, 24); b[0..16) is parent [16, 32): overlap. */
  HALI_CK_STATUS(hali_hal_command_buffer_copy(rf.cb, a, 8, b, 0, 16),
                 HALI_STATUS_INVALID_ARGUMENT, "[8, 24)", "[16, 32)",
                 "overlap");
  HALI_CK_STATUS(hali_hal_command_buffer_copy(rf.cb, rf.buffer, 0, rf.buffer,
                                              4, 8),
                 HALI_STATUS_INVALID_ARGUMENT, "overlap");
  /* Adjacent ranges do not overlap. */
  HALI_CK_OK(hali_hal_command_buffer_copy(rf.cb, a, 0, b, 0, 16));
  HALI_CK_STATUS(hali_hal_command_buffer_copy(rf.cb, a, 20, b, 0, 16),
                 HALI_STATUS_OUT_OF_RANGE, "copy source", "offset 20",
                 "buffer length 32");
  HALI_CK_STATUS(hali_hal_command_buffer_copy(rf.cb, a, 0, b, UINT64_MAX, 2),
                 HALI_STATUS_OUT_OF_RANGE, "copy target");
  HALI_CK_STATUS(hali_hal_command_buffer_update(rf.cb, "abcd", b, 30, 4),
                 HALI_STATUS_OUT_OF_RANGE, "update target", "offset 30");
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
}
END_TEST

START_TEST(test_record_dispatch_validation) {
  uint32_t constants[2] = {1, 2};
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_constants(rf.cb, 63, constants, 2),
      HALI_STATUS_OUT_OF_RANGE, "[63, 63 + 2)", "64");
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 2, 1, 1, 1),
                 HALI_STATUS_OUT_OF_RANGE, "no export 2", "has 2");
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 0, 1, 1, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "'first'",
                 "needs 1 push constants", "constant 0");
  HALI_CK_OK(hali_hal_command_buffer_push_constants(rf.cb, 0, constants, 1));
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 0, 1, 1, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "needs 2 bindings",
                 "binding 0");
  hali_hal_buffer_binding_t bindings[2] = {
      {0, rf.buffer, 0, 32},
      {1, rf.buffer, 32, HALI_HAL_WHOLE_BUFFER},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(rf.cb, bindings, 1));
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 0, 1, 1, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "binding 1");
  bindings[1].offset = 65;
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_descriptor_set(rf.cb, bindings, 2),
      HALI_STATUS_OUT_OF_RANGE, "binding 1", "offset 65");
  bindings[1].offset = 32;
  bindings[1].ordinal = 40;
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_descriptor_set(rf.cb, bindings, 2),
      HALI_STATUS_OUT_OF_RANGE, "binding ordinal 40");
  bindings[1].ordinal = 1;
  /* A buffer without DISPATCH usage cannot be bound. */
  hali_hal_buffer_params_t transfer_only = {
      .memory_types = HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_MAPPING,
  };
  hali_hal_buffer_t *b = NULL;
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(rf.allocator, transfer_only, 16, &b));
  hali_hal_buffer_binding_t no_dispatch = {1, b, 0, 16};
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_descriptor_set(rf.cb, &no_dispatch, 1),
      HALI_STATUS_PERMISSION_DENIED, "binding 1", "required DISPATCH");
  hali_hal_buffer_release(b);
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(rf.cb, bindings, 2));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 0, 3, 2, 1));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(rf.cb));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 1, 0, 1, 1));
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb), 6);
}
END_TEST

/* Push-constant ranges [offset, offset + count) against the 64 slots and
 * binding ordinals and counts against the 32 slots, at the boundaries
 * (offset + count never wraps in 32 bits). */
START_TEST(test_record_interface_boundaries) {
  static uint32_t values[64];
  static const struct {
    uint32_t offset, count;
    bool fits;
  } pc[] = {
      {0, 0, true},          {0, 1, true},   {0, 64, true},
      {63, 1, true},         {64, 0, true},  {0, 65, false},
      {64, 1, false},        {65, 0, false}, {1, UINT32_MAX, false},
      {UINT32_MAX, 1, false}, {UINT32_MAX, UINT32_MAX, false},
  };
  for (size_t i = 0; i < sizeof(pc) / sizeof(pc[0]); ++i) {
    hali_status_t s = hali_hal_command_buffer_push_constants(
        rf.cb, pc[i].offset, values, pc[i].count);
    if (pc[i].fits) {
      HALI_CK_OK(s);
      continue;
    }
    char want[96];
    snprintf(want, sizeof(want), "push constants [%u, %u + %u) exceed the 64 "
             "available", pc[i].offset, pc[i].offset, pc[i].count);
    hali_test_check_status(s, HALI_STATUS_OUT_OF_RANGE, "push_constants",
                           __FILE__, __LINE__,
                           (const char *const[]){want, NULL});
  }
  hali_hal_buffer_binding_t b = {HALI_HAL_MAX_BINDINGS - 1, rf.buffer, 0, 64};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(rf.cb, &b, 1));
  b.ordinal = HALI_HAL_MAX_BINDINGS;
  HALI_CK_STATUS(hali_hal_command_buffer_push_descriptor_set(rf.cb, &b, 1),
                 HALI_STATUS_OUT_OF_RANGE,
                 "binding ordinal 32 exceeds the maximum of 31");
  b.ordinal = UINT32_MAX;
  HALI_CK_STATUS(hali_hal_command_buffer_push_descriptor_set(rf.cb, &b, 1),
                 HALI_STATUS_OUT_OF_RANGE,
                 "binding ordinal 4294967295 exceeds the maximum of 31");
  hali_hal_buffer_binding_t many[HALI_HAL_MAX_BINDINGS + 1];
  for (uint32_t i = 0; i <= HALI_HAL_MAX_BINDINGS; ++i)
    many[i] = (hali_hal_buffer_binding_t){i, rf.buffer, 0, 64};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(
      rf.cb, many, HALI_HAL_MAX_BINDINGS));
  HALI_CK_STATUS(hali_hal_command_buffer_push_descriptor_set(
                     rf.cb, many, HALI_HAL_MAX_BINDINGS + 1),
                 HALI_STATUS_OUT_OF_RANGE,
                 "push_descriptor_set of 33 bindings exceeds the maximum of "
                 "32");
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_descriptor_set(rf.cb, many, UINT32_MAX),
      HALI_STATUS_OUT_OF_RANGE, "of 4294967295 bindings exceeds");
}
END_TEST

/* Workgroup counts: each dimension against HALI_HAL_MAX_WORKGROUP_COUNT,
 * the product (computed without wrapping) against HALI_HAL_MAX_WORKGROUPS;
 * export 1 'second' needs no bindings or constants. */
START_TEST(test_record_dispatch_workgroup_limits) {
  static const struct {
    uint32_t x, y, z;
    const char *error; /* NULL: accepted */
  } cases[] = {
      {0, 0, 0, NULL},
      {1, 1, 1, NULL},
      {0, UINT32_MAX, UINT32_MAX, "workgroup count y 4294967295 exceeds the "
                                  "maximum of 2147483647 per dimension"},
      {HALI_HAL_MAX_WORKGROUP_COUNT - 1, 1, 1, NULL},
      {HALI_HAL_MAX_WORKGROUP_COUNT, 1, 1, NULL},
      {1, HALI_HAL_MAX_WORKGROUP_COUNT, 1, NULL},
      {1, 1, HALI_HAL_MAX_WORKGROUP_COUNT, NULL},
      {HALI_HAL_MAX_WORKGROUP_COUNT, 2, 1, NULL}, /* 2^32 - 2 */
      {65535, 65537, 1, NULL},                    /* 2^32 - 1 */
      {1, 65537, 65535, NULL},
      {HALI_HAL_MAX_WORKGROUP_COUNT + 1u, 1, 1,
       "workgroup count x 2147483648 exceeds the maximum of 2147483647 per "
       "dimension (grid 2147483648 x 1 x 1)"},
      {1, HALI_HAL_MAX_WORKGROUP_COUNT + 1u, 1, "workgroup count y 2147483648"},
      {1, 1, UINT32_MAX, "workgroup count z 4294967295"},
      {65536, 65536, 1, "workgroup count 65536 x 65536 x 1 = 4294967296 "
                        "workgroups exceeds the maximum of 4294967295 per "
                        "dispatch"},
      {2, 2, 1073741824, "= 4294967296 workgroups exceeds"},
      {65536, 65536, 65536, "65536 x 65536 x 65536 = 281474976710656"},
      /* 2^22 * 2^21 * 2^21 = 2^64: wrapped, 0 workgroups. */
      {4194304, 2097152, 2097152,
       "workgroup count 4194304 x 2097152 x 2097152 overflows 64 bits (at "
       "most 4294967295 workgroups per dispatch)"},
      {4194305, 2097152, 2097152, "overflows 64 bits"}, /* 2^64 + 2^42 */
      {HALI_HAL_MAX_WORKGROUP_COUNT, HALI_HAL_MAX_WORKGROUP_COUNT,
       HALI_HAL_MAX_WORKGROUP_COUNT, "overflows 64 bits"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    size_t before = hali_hal_command_buffer_command_count(rf.cb);
    hali_status_t s = hali_hal_command_buffer_dispatch(
        rf.cb, rf.exe, 1, cases[i].x, cases[i].y, cases[i].z);
    char label[96];
    snprintf(label, sizeof(label), "grid %u x %u x %u", cases[i].x, cases[i].y,
             cases[i].z);
    if (!cases[i].error) {
      char *text = s ? hali_status_to_string(s) : NULL;
      ck_assert_msg(!s, "%s: %s", label, text);
      ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb),
                        before + 1);
      continue;
    }
    ck_assert_msg(s != NULL, "%s was accepted", label);
    char *text = hali_status_to_string(s);
    hali_status_code_t code = hali_status_code(s);
    hali_status_free(s);
    ck_assert_msg(code == HALI_STATUS_OUT_OF_RANGE, "%s: %s", label, text);
    ck_assert_msg(strstr(text, "dispatch of executable 'lib' export 1 "
                               "'second': ") != NULL &&
                      strstr(text, cases[i].error) != NULL,
                  "%s: \"%s\" lacks \"%s\"", label, text, cases[i].error);
    free(text);
    ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb), before);
  }
}
END_TEST

/* Every site that takes an (offset, length) range of a buffer: one call of
 * |site| on rf.buffer (64 bytes).  |what| is how its errors name the
 * range. */
typedef struct range_site_t {
  const char *name;
  const char *what;
  bool whole_ok; /* accepts HALI_HAL_WHOLE_BUFFER as "to the end" */
  hali_status_t (*call)(uint64_t offset, uint64_t length);
} range_site_t;

static uint8_t range_bytes[64];

static hali_status_t site_subspan(uint64_t offset, uint64_t length) {
  hali_hal_buffer_t *span = NULL;
  hali_status_t s = hali_hal_buffer_subspan(rf.buffer, offset, length, &span);
  if (!s) {
    uint64_t want = length == HALI_HAL_WHOLE_BUFFER ? 64 - offset : length;
    ck_assert_uint_eq(hali_hal_buffer_length(span), want);
  }
  hali_hal_buffer_release(span);
  return s;
}
static hali_status_t site_map(uint64_t offset, uint64_t length) {
  void *p = NULL;
  return hali_hal_buffer_map_range(rf.buffer, offset, length, &p);
}
static hali_status_t site_read(uint64_t offset, uint64_t length) {
  return hali_hal_buffer_read(rf.buffer, offset, range_bytes, (size_t)length);
}
static hali_status_t site_write(uint64_t offset, uint64_t length) {
  return hali_hal_buffer_write(rf.buffer, offset, range_bytes, (size_t)length);
}
static hali_status_t site_fill(uint64_t offset, uint64_t length) {
  return hali_hal_command_buffer_fill(rf.cb, rf.buffer, offset, length, 7, 1);
}
static hali_status_t site_update(uint64_t offset, uint64_t length) {
  return hali_hal_command_buffer_update(rf.cb, range_bytes, rf.buffer, offset,
                                        length);
}
/* The other side of a copy: a buffer of 2^64-1 bytes (host memory wrapped
 * with a nominal length: recording validates ranges but never touches the
 * bytes), so only rf.buffer's range can fail. */
static hali_hal_buffer_t *huge_partner(void) {
  hali_hal_buffer_t *b = NULL;
  HALI_CK_OK(hali_hal_buffer_wrap_host(hali_test_host_params(), range_bytes,
                                       UINT64_MAX, NULL, NULL, NULL, &b));
  return b;
}
static hali_status_t site_copy_source(uint64_t offset, uint64_t length) {
  hali_hal_buffer_t *other = huge_partner();
  hali_status_t s = hali_hal_command_buffer_copy(rf.cb, rf.buffer, offset,
                                                 other, 0, length);
  hali_hal_buffer_release(other);
  return s;
}
static hali_status_t site_copy_target(uint64_t offset, uint64_t length) {
  hali_hal_buffer_t *other = huge_partner();
  hali_status_t s = hali_hal_command_buffer_copy(rf.cb, other, 0, rf.buffer,
                                                 offset, length);
  hali_hal_buffer_release(other);
  return s;
}
static hali_status_t site_binding(uint64_t offset, uint64_t length) {
  hali_hal_buffer_binding_t b = {0, rf.buffer, offset, length};
  return hali_hal_command_buffer_push_descriptor_set(rf.cb, &b, 1);
}

/* Boundary offsets and lengths on every range site: 0, 1, max-1, max,
 * max+1 around the 64-byte length and around 2^64 (sums of exactly 2^64
 * and beyond must say "overflows", never wrap to a small end). */
START_TEST(test_range_sites_boundaries) {
  static const range_site_t sites[] = {
      {"subspan", "subspan", true, site_subspan},
      {"map_range", "access", true, site_map},
      {"read", "access", false, site_read},
      {"write", "access", false, site_write},
      {"fill", "fill target", false, site_fill},
      {"update", "update target", false, site_update},
      {"copy source", "copy source", false, site_copy_source},
      {"copy target", "copy target", false, site_copy_target},
      {"push_descriptor_set", "binding 0", true, site_binding},
  };
  enum { FITS, EXCEEDS, OVERFLOWS, PAST_END };
  /* |whole|: the outcome on sites that read a length of UINT64_MAX as
   * HALI_HAL_WHOLE_BUFFER; |exact|: on the others. */
  static const struct {
    uint64_t offset, length;
    int whole, exact;
  } cases[] = {
      {0, 0, FITS, FITS},
      {0, 1, FITS, FITS},
      {0, 63, FITS, FITS},
      {0, 64, FITS, FITS},
      {1, 63, FITS, FITS},
      {63, 1, FITS, FITS},
      {64, 0, FITS, FITS},
      {0, 65, EXCEEDS, EXCEEDS},
      {1, 64, EXCEEDS, EXCEEDS},
      {64, 1, EXCEEDS, EXCEEDS},
      {65, 0, EXCEEDS, EXCEEDS},
      {UINT64_MAX - 1, 1, EXCEEDS, EXCEEDS}, /* end 2^64-1: no overflow */
      {UINT64_MAX, 0, EXCEEDS, EXCEEDS},
      {UINT64_MAX, 1, OVERFLOWS, OVERFLOWS},     /* end exactly 2^64 */
      {UINT64_MAX - 3, 8, OVERFLOWS, OVERFLOWS}, /* would wrap to 4 */
      {UINT64_C(1) << 63, UINT64_C(1) << 63, OVERFLOWS, OVERFLOWS}, /* 2^64 */
      {1, UINT64_MAX - 1, EXCEEDS, EXCEEDS},   /* 2^64 - 1 */
      {2, UINT64_MAX - 1, OVERFLOWS, OVERFLOWS}, /* 2^64 */
      {3, UINT64_MAX - 1, OVERFLOWS, OVERFLOWS}, /* 2^64 + 1 */
      /* A length of UINT64_MAX. */
      {0, UINT64_MAX, FITS, EXCEEDS},
      {64, UINT64_MAX, FITS, OVERFLOWS},
      {65, UINT64_MAX, PAST_END, OVERFLOWS},
      {UINT64_MAX, UINT64_MAX, PAST_END, OVERFLOWS},
  };
  for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); ++i) {
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
      uint64_t off = cases[c].offset, len = cases[c].length;
      int outcome = sites[i].whole_ok ? cases[c].whole : cases[c].exact;
      size_t before = hali_hal_command_buffer_command_count(rf.cb);
      hali_status_t s = sites[i].call(off, len);
      char label[160], want[256];
      snprintf(label, sizeof(label), "%s(offset %" PRIu64 ", length %" PRIu64
               ")", sites[i].name, off, len);
      if (outcome == FITS) {
        char *text = s ? hali_status_to_string(s) : NULL;
        ck_assert_msg(s == NULL, "%s failed: %s", label, text);
        continue;
      }
      if (outcome == EXCEEDS) {
        snprintf(want, sizeof(want),
                 "%s: range [offset %" PRIu64 ", length %" PRIu64
                 "] exceeds the buffer length 64",
                 sites[i].what, off, len);
      } else if (outcome == OVERFLOWS) {
        snprintf(want, sizeof(want),
                 "%s: offset %" PRIu64 " + length %" PRIu64
                 " overflows 64 bits (the buffer length is 64",
                 sites[i].what, off, len);
      } else {
        snprintf(want, sizeof(want),
                 "%s: offset %" PRIu64
                 " (to the end of the buffer) is past the buffer length 64",
                 sites[i].what, off);
      }
      ck_assert_msg(s != NULL, "%s succeeded; expected \"%s\"", label, want);
      char *text = hali_status_to_string(s);
      hali_status_code_t code = hali_status_code(s);
      hali_status_free(s);
      ck_assert_msg(code == HALI_STATUS_OUT_OF_RANGE, "%s: %s", label, text);
      ck_assert_msg(strstr(text, want) != NULL, "%s: \"%s\" lacks \"%s\"",
                    label, text, want);
      free(text);
      /* A failed record leaves the command buffer unchanged. */
      ck_assert_uint_eq(hali_hal_command_buffer_command_count(rf.cb), before);
    }
  }
}
END_TEST

START_TEST(test_record_state_errors) {
  HALI_CK_OK(hali_hal_command_buffer_finalize(rf.cb));
  ck_assert(hali_hal_command_buffer_is_finalized(rf.cb));
  HALI_CK_STATUS(hali_hal_command_buffer_finalize(rf.cb),
                 HALI_STATUS_FAILED_PRECONDITION, "already finalized");
  HALI_CK_STATUS(hali_hal_command_buffer_fill(rf.cb, rf.buffer, 0, 4, 0, 4),
                 HALI_STATUS_FAILED_PRECONDITION, "cannot record fill",
                 "finalized");
  HALI_CK_STATUS(hali_hal_command_buffer_execution_barrier(rf.cb),
                 HALI_STATUS_FAILED_PRECONDITION, "finalized");
  hali_hal_command_buffer_t *transfer = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
      HALI_HAL_COMMAND_CATEGORY_TRANSFER, &transfer));
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(transfer, rf.exe, 1, 1, 1, 1),
                 HALI_STATUS_PERMISSION_DENIED, "cannot record dispatch",
                 "DISPATCH category");
  uint32_t c = 0;
  HALI_CK_STATUS(hali_hal_command_buffer_push_constants(transfer, 0, &c, 1),
                 HALI_STATUS_PERMISSION_DENIED, "push_constants");
  hali_hal_command_buffer_release(transfer);
  hali_hal_command_buffer_t *dispatch = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
      HALI_HAL_COMMAND_CATEGORY_DISPATCH, &dispatch));
  HALI_CK_STATUS(hali_hal_command_buffer_fill(dispatch, rf.buffer, 0, 4, 0, 4),
                 HALI_STATUS_PERMISSION_DENIED, "cannot record fill",
                 "TRANSFER category");
  hali_hal_command_buffer_release(dispatch);
  HALI_CK_STATUS(hali_hal_command_buffer_create(0, 0, &dispatch),
                 HALI_STATUS_INVALID_ARGUMENT, "categories 0x0");
  HALI_CK_STATUS(hali_hal_command_buffer_create(
                     8, HALI_HAL_COMMAND_CATEGORY_ANY, &dispatch),
                 HALI_STATUS_INVALID_ARGUMENT, "mode bits 0x8");
}
END_TEST

/* push_binding records exactly what push_descriptor_set of one binding
 * records (every byte, with the record arrays full or not; a subspan as
 * its root's range) and refuses what it refuses, with the same errors. */
START_TEST(test_record_push_binding) {
  hali_hal_command_buffer_t *one = NULL, *general = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_ANY,
      &one));
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_ANY,
      &general));
  /* 40 bindings: past the first record array and resource list (the
   * general path grows them), then inline. */
  for (uint32_t i = 0; i < 40; ++i) {
    const hali_hal_device_size_t off = i % 8, len = 64 - off - (i % 3);
    HALI_CK_OK(hali_hal_command_buffer_push_binding(one, i % 4, rf.buffer,
                                                    off, len));
    hali_hal_buffer_binding_t b = {i % 4, rf.buffer, off, len};
    HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(general, &b, 1));
  }
  HALI_CK_OK(hali_hal_command_buffer_push_binding(one, 5, rf.buffer, 8,
                                                  HALI_HAL_WHOLE_BUFFER));
  hali_hal_buffer_binding_t whole = {5, rf.buffer, 8, HALI_HAL_WHOLE_BUFFER};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(general, &whole, 1));
  ck_assert_uint_eq(one->size, general->size);
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(one), 41);
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(general), 41);
  ck_assert_int_eq(memcmp(one->data, general->data, one->size), 0);
  ck_assert_uint_eq(one->bindings_set, general->bindings_set);
  ck_assert_uint_eq(one->bindings[5].length, 56);
  ck_assert_uint_eq(one->resource_count, general->resource_count);
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 32, rf.buffer, 0, 4),
      HALI_STATUS_OUT_OF_RANGE, "binding ordinal 32 exceeds the maximum of 31");
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 1, NULL, 0, 4),
      HALI_STATUS_INVALID_ARGUMENT, "binding 1 has no buffer");
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 1, rf.buffer, 60, 8),
      HALI_STATUS_OUT_OF_RANGE, "binding 1");
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 1, rf.buffer, 65,
                                           HALI_HAL_WHOLE_BUFFER),
      HALI_STATUS_OUT_OF_RANGE, "binding 1");
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(one), 41);
  /* A subspan is recorded as its root's range, and the root retained once
   * for the subspans of it pushed in a row (not the subspans). */
  hali_hal_buffer_t *s1 = NULL, *s2 = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(rf.buffer, 16, 32, &s1));
  HALI_CK_OK(hali_hal_buffer_subspan(s1, 8, 16, &s2)); /* bytes [24, 40) */
  const uint_fast32_t root_refs = atomic_load(&rf.buffer->ref.count);
  const size_t resources = one->resource_count;
  const size_t size = one->size;
  HALI_CK_OK(hali_hal_command_buffer_push_binding(one, 2, s2, 4, 8));
  HALI_CK_OK(hali_hal_command_buffer_push_binding(one, 3, s1, 0, 32));
  HALI_CK_OK(hali_hal_command_buffer_push_binding(one, 4, s2, 0, 16));
  for (int i = 0; i < 3; ++i) {
    hali_hal_buffer_binding_t sb = {2 + i, i == 1 ? s1 : s2, i == 0 ? 4 : 0,
                                    i == 0 ? 8 : i == 1 ? 32 : 16};
    HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(general, &sb, 1));
  }
  ck_assert_uint_eq(one->size, general->size);
  ck_assert_int_eq(memcmp(one->data, general->data, one->size), 0);
  const hali_hal_command_push_descriptor_set_t *rec =
      (const void *)(one->data + size);
  ck_assert_uint_eq(rec->count, 1);
  ck_assert_ptr_eq(rec->bindings[0].buffer, rf.buffer);
  ck_assert_uint_eq(rec->bindings[0].offset, 28);
  ck_assert_uint_eq(rec->bindings[0].length, 8);
  ck_assert_ptr_eq(one->bindings[3].buffer, rf.buffer);
  ck_assert_uint_eq(one->bindings[3].offset, 16);
  ck_assert_uint_eq(one->bindings[4].offset, 24);
  ck_assert_uint_eq(atomic_load(&s1->ref.count), 1); /* neither retained */
  ck_assert_uint_eq(atomic_load(&s2->ref.count), 1);
  ck_assert_uint_le(one->resource_count, resources + 1);
  ck_assert_uint_le(atomic_load(&rf.buffer->ref.count), root_refs + 1);
  HALI_CK_STATUS(hali_hal_command_buffer_push_binding(one, 2, s2, 4, 13),
                 HALI_STATUS_OUT_OF_RANGE, "binding 2");
  hali_hal_buffer_release(s2);
  hali_hal_buffer_release(s1);
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(one), 44);
  HALI_CK_OK(hali_hal_command_buffer_finalize(one));
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 0, rf.buffer, 0, 4),
      HALI_STATUS_FAILED_PRECONDITION, "cannot record push_descriptor_set",
      "finalized");
  hali_hal_command_buffer_release(one);
  hali_hal_command_buffer_release(general);
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_TRANSFER, &one));
  HALI_CK_STATUS(
      hali_hal_command_buffer_push_binding(one, 0, rf.buffer, 0, 4),
      HALI_STATUS_PERMISSION_DENIED, "push_descriptor_set", "DISPATCH");
  hali_hal_command_buffer_release(one);
}
END_TEST

/* A recording retains each executable once however many dispatches name
 * it (pushes in between), and releases it with the recording. */
START_TEST(test_record_retains_executable_once) {
  hali_hal_executable_t *other = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&test_library, NULL,
                                                     &other));
  const uint_fast32_t refs = atomic_load(&rf.exe->ref.count);
  for (int i = 0; i < 3; ++i) {
    HALI_CK_OK(hali_hal_command_buffer_push_binding(rf.cb, 0, rf.buffer, 0, 8));
    HALI_CK_OK(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 1, 1, 1, 1));
  }
  ck_assert_uint_eq(atomic_load(&rf.exe->ref.count), refs + 1);
  HALI_CK_OK(hali_hal_command_buffer_dispatch(rf.cb, other, 1, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(rf.cb, rf.exe, 1, 1, 1, 1));
  ck_assert_uint_eq(atomic_load(&rf.exe->ref.count), refs + 2);
  ck_assert_uint_eq(atomic_load(&other->ref.count), 2);
  hali_hal_command_buffer_release(rf.cb);
  rf.cb = NULL;
  ck_assert_uint_eq(atomic_load(&rf.exe->ref.count), refs);
  ck_assert_uint_eq(atomic_load(&other->ref.count), 1);
  hali_hal_executable_release(other);
}
END_TEST

/* A command buffer cache keeps one destroyed command buffer and hands it
 * out again reset: a new id, mode and categories, no records, no push
 * state, not finalized, its old resources released; arrays past the cap
 * are freed instead; a device's command buffers go through its cache. */
START_TEST(test_command_buffer_cache) {
  hali_hal_command_buffer_cache_t *cache = NULL;
  HALI_CK_OK(hali_hal_command_buffer_cache_create(&cache));
  ck_assert(!hali_hal_command_buffer_cache_has_spare(cache));
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create_cached(
      cache, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  const uint_fast32_t refs = atomic_load(&rf.buffer->ref.count);
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, rf.buffer, 0, 8, 7, 4));
  hali_hal_buffer_binding_t b[2] = {{0, rf.buffer, 0, 16},
                                    {1, rf.buffer, 16, 16}};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, b, 2));
  uint32_t c[1] = {5};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, c, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, rf.exe, 0, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  HALI_CK_OK(hali_hal_command_buffer_begin_submit(cb));
  ck_assert_uint_eq(atomic_load(&rf.buffer->ref.count), refs + 1);
  const hali_hal_command_buffer_t *first = cb;
  const uint32_t first_id = hali_hal_trace_id(cb);
  hali_hal_command_buffer_release(cb);
  ck_assert(hali_hal_command_buffer_cache_has_spare(cache));
  ck_assert_uint_eq(atomic_load(&rf.buffer->ref.count), refs);
  /* A failed create leaves the spare where it is. */
  HALI_CK_STATUS(hali_hal_command_buffer_create_cached(
                     cache, 8, HALI_HAL_COMMAND_CATEGORY_ANY, &cb),
                 HALI_STATUS_INVALID_ARGUMENT, "mode bits 0x8");
  ck_assert(hali_hal_command_buffer_cache_has_spare(cache));
  HALI_CK_OK(hali_hal_command_buffer_create_cached(
      cache, HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
      HALI_HAL_COMMAND_CATEGORY_DISPATCH, &cb));
  ck_assert_ptr_eq(cb, first);
  ck_assert(!hali_hal_command_buffer_cache_has_spare(cache));
  ck_assert_uint_ne(hali_hal_trace_id(cb), first_id);
  ck_assert(!hali_hal_command_buffer_is_finalized(cb));
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(cb), 0);
  ck_assert_uint_eq(hali_hal_command_buffer_mode(cb),
                    HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE);
  ck_assert_uint_eq(hali_hal_command_buffer_categories(cb),
                    HALI_HAL_COMMAND_CATEGORY_DISPATCH);
  ck_assert_ptr_null(hali_hal_command_list_first(cb));
  ck_assert_uint_eq(cb->resource_count, 0);
  ck_assert(!cb->dispatches_checked);
  /* The pushes of the first recording are gone. */
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(cb, rf.exe, 0, 1, 1, 1),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "needs 1 push constants but constant 0 was never pushed");
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, c, 1));
  HALI_CK_STATUS(hali_hal_command_buffer_dispatch(cb, rf.exe, 0, 1, 1, 1),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "needs 2 bindings but binding 0 was never pushed");
  HALI_CK_STATUS(hali_hal_command_buffer_fill(cb, rf.buffer, 0, 4, 0, 4),
                 HALI_STATUS_PERMISSION_DENIED, "TRANSFER category");
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  /* Reusable now: submitted twice. */
  HALI_CK_OK(hali_hal_command_buffer_begin_submit(cb));
  HALI_CK_OK(hali_hal_command_buffer_begin_submit(cb));
  hali_hal_command_buffer_release(cb);
  ck_assert(hali_hal_command_buffer_cache_has_spare(cache));

  /* Past the cap: freed, and the older spare stays. */
  HALI_CK_OK(hali_hal_command_buffer_create_cached(
      cache, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  ck_assert_ptr_eq(cb, first);
  hali_hal_command_buffer_t *big = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create_cached(
      cache, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &big));
  ck_assert_ptr_ne(big, first);
  hali_hal_buffer_t *large = hali_test_allocate(rf.allocator, 64);
  static uint8_t bytes[64];
  for (int i = 0; i < HALI_HAL_COMMAND_CACHE_MAX_BYTES / 64 + 1; ++i)
    HALI_CK_OK(hali_hal_command_buffer_update(big, bytes, large, 0, 56));
  ck_assert_uint_gt(big->capacity, HALI_HAL_COMMAND_CACHE_MAX_BYTES);
  hali_hal_command_buffer_release(cb);
  hali_hal_command_buffer_release(big);
  hali_hal_buffer_release(large);
  ck_assert(hali_hal_command_buffer_cache_has_spare(cache));
  HALI_CK_OK(hali_hal_command_buffer_create_cached(
      cache, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  ck_assert_ptr_eq(cb, first);
  /* The cache goes before the command buffer made from it: the command
   * buffer keeps it alive and frees both (leak-checked by the suite's
   * valgrind and ASan runs). */
  hali_hal_command_buffer_cache_release(cache);
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  hali_hal_command_buffer_release(cb);

  /* A device's command buffers are recycled through its cache. */
  hali_hal_device_params_t dp;
  hali_hal_device_params_initialize(&dp);
  hali_hal_device_t *device = NULL;
  HALI_CK_OK(hali_hal_device_create(&dp, &device));
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  first = cb;
  hali_hal_command_buffer_release(cb);
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  ck_assert_ptr_eq(cb, first);
  hali_hal_device_release(device); /* before its command buffer */
  hali_hal_command_buffer_release(cb);
}
END_TEST

/* ---- semaphores ---- */

START_TEST(test_semaphore_signal_query_wait) {
  hali_hal_semaphore_t *s = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(5, &s));
  uint64_t value = 0;
  HALI_CK_OK(hali_hal_semaphore_query(s, &value));
  ck_assert_uint_eq(value, 5);
  HALI_CK_OK(hali_hal_semaphore_wait(s, 5, 0));
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, 6, 0),
                 HALI_STATUS_DEADLINE_EXCEEDED, "at value 5",
                 "did not reach 6");
  int64_t start = hali_test_now_ns();
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, 7, 20 * 1000000),
                 HALI_STATUS_DEADLINE_EXCEEDED, "did not reach 7",
                 "within 20000000 ns");
  ck_assert_int_ge(hali_test_now_ns() - start, 20 * 1000000);
  HALI_CK_OK(hali_hal_semaphore_signal(s, 9));
  HALI_CK_OK(hali_hal_semaphore_wait(s, 7, 0));
  HALI_CK_OK(hali_hal_semaphore_wait(s, 9, HALI_INFINITE));
  HALI_CK_STATUS(hali_hal_semaphore_signal(s, 8),
                 HALI_STATUS_FAILED_PRECONDITION, "signal to 8",
                 "current value 9");
  HALI_CK_STATUS(hali_hal_semaphore_signal(s, 9),
                 HALI_STATUS_FAILED_PRECONDITION, "signal to 9");
  HALI_CK_OK(hali_hal_semaphore_query(s, &value));
  ck_assert_uint_eq(value, 9);
  hali_hal_semaphore_release(s);
}
END_TEST

/* The top of the timeline: 2^64-1 is a legal payload (failures are kept
 * beside the value, nothing is reserved); past it nothing advances. */
START_TEST(test_semaphore_top_of_timeline) {
  hali_hal_semaphore_t *s = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(UINT64_MAX - 2, &s));
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, UINT64_MAX, 0),
                 HALI_STATUS_DEADLINE_EXCEEDED,
                 "at value 18446744073709551613",
                 "did not reach 18446744073709551615");
  HALI_CK_OK(hali_hal_semaphore_signal(s, UINT64_MAX - 1));
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, UINT64_MAX, 0),
                 HALI_STATUS_DEADLINE_EXCEEDED,
                 "did not reach 18446744073709551615");
  hali_hal_fence_t *top = NULL, *below = NULL;
  HALI_CK_OK(hali_hal_fence_create_at(s, UINT64_MAX, &top));
  HALI_CK_OK(hali_hal_fence_create_at(s, UINT64_MAX - 1, &below));
  bool ready = true;
  HALI_CK_OK(hali_hal_fence_query(top, &ready));
  ck_assert(!ready);
  HALI_CK_OK(hali_hal_fence_query(below, &ready));
  ck_assert(ready);
  HALI_CK_OK(hali_hal_fence_signal(top));
  HALI_CK_OK(hali_hal_fence_query(top, &ready));
  ck_assert(ready);
  uint64_t value = 0;
  HALI_CK_OK(hali_hal_semaphore_query(s, &value));
  ck_assert_uint_eq(value, UINT64_MAX);
  HALI_CK_OK(hali_hal_semaphore_wait(s, UINT64_MAX, 0));
  HALI_CK_OK(hali_hal_semaphore_wait(s, 0, 0));
  /* Nothing moves past it: signalling again is "does not advance". */
  HALI_CK_STATUS(hali_hal_semaphore_signal(s, UINT64_MAX),
                 HALI_STATUS_FAILED_PRECONDITION,
                 "signal to 18446744073709551615 does not advance the current "
                 "value 18446744073709551615");
  /* A failure still wins over the reached value, as at any value. */
  hali_hal_semaphore_fail(s, hali_status_make(HALI_STATUS_ABORTED, "late"));
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, UINT64_MAX, 0),
                 HALI_STATUS_ABORTED, "late");
  hali_hal_fence_release(top);
  hali_hal_fence_release(below);
  hali_hal_semaphore_release(s);
}
END_TEST

START_TEST(test_semaphore_first_failure_wins) {
  hali_hal_semaphore_t *s = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(0, &s));
  HALI_CK_OK(hali_hal_semaphore_signal(s, 1));
  hali_hal_semaphore_fail(
      s, hali_status_make(HALI_STATUS_DATA_LOSS, "first failure"));
  hali_hal_semaphore_fail(
      s, hali_status_make(HALI_STATUS_ABORTED, "second failure"));
  uint64_t value = 0;
  HALI_CK_STATUS(hali_hal_semaphore_query(s, &value), HALI_STATUS_DATA_LOSS,
                 "first failure");
  ck_assert_uint_eq(value, 1);
  /* Every waiter — also for values reached before — sees the failure. */
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, 1, 0), HALI_STATUS_DATA_LOSS,
                 "first failure");
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, 100, HALI_INFINITE),
                 HALI_STATUS_DATA_LOSS, "first failure");
  HALI_CK_STATUS(hali_hal_semaphore_signal(s, 2), HALI_STATUS_DATA_LOSS,
                 "first failure", "signalling a failed semaphore");
  hali_hal_semaphore_release(s);
}
END_TEST

typedef struct signal_later_t {
  hali_hal_semaphore_t *semaphore;
  uint64_t value;
  int delay_ms;
  bool fail;
} signal_later_t;

static void *signal_later_main(void *arg) {
  signal_later_t *job = arg;
  hali_test_sleep_ms(job->delay_ms);
  if (job->fail)
    hali_hal_semaphore_fail(
        job->semaphore,
        hali_status_make(HALI_STATUS_CANCELLED, "failed from a thread"));
  else
    hali_status_free(hali_hal_semaphore_signal(job->semaphore, job->value));
  return NULL;
}

START_TEST(test_semaphore_cross_thread) {
  hali_hal_semaphore_t *s = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(0, &s));
  signal_later_t job = {s, 3, 20, false};
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, signal_later_main, &job), 0);
  HALI_CK_OK(hali_hal_semaphore_wait(s, 3, HALI_INFINITE));
  pthread_join(thread, NULL);
  /* A finite wait woken by failure from another thread. */
  job.fail = true;
  ck_assert_int_eq(pthread_create(&thread, NULL, signal_later_main, &job), 0);
  HALI_CK_STATUS(hali_hal_semaphore_wait(s, 4, 5000 * 1000000LL),
                 HALI_STATUS_CANCELLED, "failed from a thread");
  pthread_join(thread, NULL);
  hali_hal_semaphore_release(s);
}
END_TEST

typedef struct notify_record_t {
  int calls;
  hali_status_code_t code;
} notify_record_t;

static void record_notify(void *user, hali_status_t status) {
  notify_record_t *r = user;
  r->calls++;
  r->code = hali_status_code(status);
}

START_TEST(test_semaphore_timepoints) {
  hali_hal_semaphore_t *s = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(1, &s));
  hali_hal_semaphore_timepoint_t tp1, tp2, tp3, tp4;
  notify_record_t r1 = {0, 0}, r2 = {0, 0}, r3 = {0, 0}, r4 = {0, 0};
  ck_assert(!hali_hal_semaphore_notify(s, 1, &tp1, record_notify, &r1));
  ck_assert(hali_hal_semaphore_notify(s, 2, &tp1, record_notify, &r1));
  ck_assert(hali_hal_semaphore_notify(s, 4, &tp2, record_notify, &r2));
  ck_assert(hali_hal_semaphore_notify(s, 9, &tp3, record_notify, &r3));
  ck_assert(hali_hal_semaphore_notify(s, 9, &tp4, record_notify, &r4));
  ck_assert(hali_hal_semaphore_cancel(s, &tp4));
  ck_assert(!hali_hal_semaphore_cancel(s, &tp4));
  HALI_CK_OK(hali_hal_semaphore_signal(s, 3));
  ck_assert_int_eq(r1.calls, 1);
  ck_assert_int_eq(r1.code, HALI_STATUS_OK);
  ck_assert_int_eq(r2.calls, 0);
  HALI_CK_OK(hali_hal_semaphore_signal(s, 4));
  ck_assert_int_eq(r2.calls, 1);
  hali_hal_semaphore_fail(s, hali_status_make(HALI_STATUS_ABORTED, "boom"));
  ck_assert_int_eq(r3.calls, 1);
  ck_assert_int_eq(r3.code, HALI_STATUS_ABORTED);
  ck_assert_int_eq(r4.calls, 0);
  ck_assert(!hali_hal_semaphore_notify(s, 10, &tp4, record_notify, &r4));
  hali_hal_semaphore_release(s);
}
END_TEST

/* ---- fences ---- */

START_TEST(test_fence_basics) {
  bool ready = false;
  HALI_CK_OK(hali_hal_fence_query(NULL, &ready));
  ck_assert(ready);
  HALI_CK_OK(hali_hal_fence_await(NULL, 0));
  HALI_CK_OK(hali_hal_fence_signal(NULL));
  hali_hal_fence_fail(NULL, hali_status_make(HALI_STATUS_UNKNOWN, "dropped"));
  hali_hal_fence_t *empty = NULL;
  HALI_CK_OK(hali_hal_fence_create(&empty));
  HALI_CK_OK(hali_hal_fence_query(empty, &ready));
  ck_assert(ready);
  HALI_CK_OK(hali_hal_fence_await(empty, 0));

  hali_hal_semaphore_t *a = NULL, *b = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(0, &a));
  HALI_CK_OK(hali_hal_semaphore_create(10, &b));
  hali_hal_fence_t *fa = NULL, *fb = NULL, *joined = NULL;
  HALI_CK_OK(hali_hal_fence_create_at(a, 2, &fa));
  HALI_CK_OK(hali_hal_fence_create_at(b, 11, &fb));
  HALI_CK_OK(hali_hal_fence_insert(fa, a, 1)); /* lower: keeps 2 */
  ck_assert_uint_eq(hali_hal_fence_point_count(fa), 1);
  hali_hal_fence_t *parts[3] = {fa, NULL, fb};
  HALI_CK_OK(hali_hal_fence_join(parts, 3, &joined));
  ck_assert_uint_eq(hali_hal_fence_point_count(joined), 2);
  HALI_CK_OK(hali_hal_fence_query(joined, &ready));
  ck_assert(!ready);
  HALI_CK_STATUS(hali_hal_fence_await(joined, 0),
                 HALI_STATUS_DEADLINE_EXCEEDED, "at value 0",
                 "did not reach 2");
  HALI_CK_STATUS(hali_hal_fence_await(joined, 10 * 1000000),
                 HALI_STATUS_DEADLINE_EXCEEDED, "did not reach");
  HALI_CK_OK(hali_hal_fence_signal(fa));
  HALI_CK_OK(hali_hal_fence_query(fa, &ready));
  ck_assert(ready);
  HALI_CK_OK(hali_hal_fence_query(joined, &ready));
  ck_assert(!ready);
  HALI_CK_OK(hali_hal_fence_signal(joined)); /* a is already at 2: fine */
  HALI_CK_OK(hali_hal_fence_await(joined, 0));
  hali_hal_fence_t *all[2] = {fa, fb};
  HALI_CK_OK(hali_hal_fence_await_all(all, 2, 0));
  uint64_t value = 0;
  HALI_CK_OK(hali_hal_semaphore_query(b, &value));
  ck_assert_uint_eq(value, 11);
  hali_hal_fence_release(joined);
  hali_hal_fence_release(fa);
  hali_hal_fence_release(fb);
  hali_hal_fence_release(empty);
  hali_hal_semaphore_release(a);
  hali_hal_semaphore_release(b);
}
END_TEST

START_TEST(test_fence_failure) {
  hali_hal_fence_t *f = NULL, *g = NULL, *joined = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&f));
  HALI_CK_OK(hali_hal_fence_create_pending(&g));
  hali_hal_fence_t *parts[2] = {f, g};
  HALI_CK_OK(hali_hal_fence_join(parts, 2, &joined));
  hali_hal_fence_fail(f, hali_status_make(HALI_STATUS_UNAVAILABLE, "gone"));
  hali_hal_fence_fail(f, hali_status_make(HALI_STATUS_INTERNAL, "later"));
  bool ready = false;
  HALI_CK_STATUS(hali_hal_fence_query(joined, &ready),
                 HALI_STATUS_UNAVAILABLE, "gone");
  ck_assert(ready);
  HALI_CK_STATUS(hali_hal_fence_await(joined, HALI_INFINITE),
                 HALI_STATUS_UNAVAILABLE, "gone");
  HALI_CK_STATUS(hali_hal_fence_signal(f), HALI_STATUS_UNAVAILABLE, "gone");
  hali_hal_fence_release(joined);
  hali_hal_fence_release(f);
  hali_hal_fence_release(g);
}
END_TEST

typedef struct fence_later_t {
  hali_hal_fence_t *fence;
  int delay_ms;
  bool fail;
} fence_later_t;

static void *fence_later_main(void *arg) {
  fence_later_t *job = arg;
  hali_test_sleep_ms(job->delay_ms);
  if (job->fail)
    hali_hal_fence_fail(job->fence,
                        hali_status_make(HALI_STATUS_CANCELLED, "late fail"));
  else
    hali_status_free(hali_hal_fence_signal(job->fence));
  return NULL;
}

START_TEST(test_fence_await_multi_point) {
  hali_hal_fence_t *a = NULL, *b = NULL, *joined = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&a));
  HALI_CK_OK(hali_hal_fence_create_pending(&b));
  hali_hal_fence_t *parts[2] = {a, b};
  HALI_CK_OK(hali_hal_fence_join(parts, 2, &joined));
  /* Finite timeout across two points names the unreached value. */
  HALI_CK_STATUS(hali_hal_fence_await(joined, 10 * 1000000),
                 HALI_STATUS_DEADLINE_EXCEEDED, "did not reach 1",
                 "awaiting 2 fence points");
  /* Both signalled from other threads: the await wakes. */
  fence_later_t ja = {a, 5, false}, jb = {b, 15, false};
  pthread_t ta, tb;
  ck_assert_int_eq(pthread_create(&ta, NULL, fence_later_main, &ja), 0);
  ck_assert_int_eq(pthread_create(&tb, NULL, fence_later_main, &jb), 0);
  HALI_CK_OK(hali_hal_fence_await(joined, HALI_INFINITE));
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  hali_hal_fence_release(joined);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  /* A failure of the second point ends the wait while the first is still
   * pending. */
  HALI_CK_OK(hali_hal_fence_create_pending(&a));
  HALI_CK_OK(hali_hal_fence_create_pending(&b));
  parts[0] = a;
  parts[1] = b;
  HALI_CK_OK(hali_hal_fence_join(parts, 2, &joined));
  jb.fence = b;
  jb.fail = true;
  ck_assert_int_eq(pthread_create(&tb, NULL, fence_later_main, &jb), 0);
  HALI_CK_STATUS(hali_hal_fence_await(joined, HALI_INFINITE),
                 HALI_STATUS_CANCELLED, "late fail");
  pthread_join(tb, NULL);
  hali_hal_fence_release(joined);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
}
END_TEST

/* ---- Stop requests. ---- */

/* The first request wins and sets every watcher's flag (code first); a
 * watch after the request registers nothing; the fuel pool never hands
 * out more than was put in, and saturates instead of wrapping. */
START_TEST(test_stop_requests_watchers_and_fuel) {
  hali_hal_stop_t *stop = NULL;
  HALI_CK_OK(hali_hal_stop_create(INT64_MAX, &stop));
  ck_assert_int_eq(hali_hal_stop_check(stop), HALI_STATUS_OK);
  ck_assert_int_eq(hali_hal_stop_check(NULL), HALI_STATUS_OK);
  ck_assert_int_eq(hali_hal_stop_deadline(stop), INT64_MAX);
  atomic_bool flag_a, flag_b;
  _Atomic(hali_status_code_t) code_a, code_b;
  atomic_init(&flag_a, false);
  atomic_init(&flag_b, false);
  atomic_init(&code_a, HALI_STATUS_OK);
  atomic_init(&code_b, HALI_STATUS_OK);
  hali_hal_stop_watch_t a = {.flag = &flag_a, .code = &code_a};
  hali_hal_stop_watch_t b = {.flag = &flag_b, .code = &code_b};
  ck_assert(hali_hal_stop_watch(stop, &a));
  ck_assert(hali_hal_stop_watch(stop, &b));
  hali_hal_stop_unwatch(stop, &b); /* b is no longer told */
  hali_hal_stop_request(stop, HALI_STATUS_OK); /* not a request */
  ck_assert(!atomic_load(&flag_a));
  hali_hal_stop_request(stop, HALI_STATUS_CANCELLED);
  hali_hal_stop_request(stop, HALI_STATUS_DEADLINE_EXCEEDED); /* too late */
  ck_assert(atomic_load(&flag_a));
  ck_assert_int_eq(atomic_load(&code_a), HALI_STATUS_CANCELLED);
  ck_assert(!atomic_load(&flag_b));
  ck_assert_int_eq(hali_hal_stop_check(stop), HALI_STATUS_CANCELLED);
  ck_assert(!hali_hal_stop_watch(stop, &b));
  hali_hal_stop_unwatch(stop, &a);
  HALI_CK_STATUS(hali_hal_stop_status(HALI_STATUS_CANCELLED),
                 HALI_STATUS_CANCELLED, "was cancelled");
  HALI_CK_STATUS(hali_hal_stop_status(HALI_STATUS_RESOURCE_EXHAUSTED),
                 HALI_STATUS_RESOURCE_EXHAUSTED,
                 "was stopped (RESOURCE_EXHAUSTED)");
  ck_assert_ptr_null(hali_hal_stop_status(HALI_STATUS_OK));
  /* Fuel. */
  ck_assert(!hali_hal_stop_fuel_enabled(stop));
  ck_assert_uint_eq(hali_hal_stop_take_fuel(stop, 10), 0);
  hali_hal_stop_add_fuel(stop, 0);
  ck_assert(hali_hal_stop_fuel_enabled(stop));
  hali_hal_stop_add_fuel(stop, 10000);
  ck_assert_uint_eq(hali_hal_stop_take_fuel(stop, 4096), 4096);
  ck_assert_uint_eq(hali_hal_stop_take_fuel(stop, 4096), 4096);
  ck_assert_uint_eq(hali_hal_stop_take_fuel(stop, 4096), 10000 - 8192);
  ck_assert_uint_eq(hali_hal_stop_take_fuel(stop, 4096), 0);
  hali_hal_stop_add_fuel(stop, UINT64_MAX - 1);
  hali_hal_stop_add_fuel(stop, 5);
  ck_assert_uint_eq(hali_hal_stop_fuel(stop), UINT64_MAX);
  hali_hal_stop_retain(stop);
  hali_hal_stop_release(stop);
  hali_hal_stop_release(stop);
  hali_hal_stop_retain(NULL);
  hali_hal_stop_release(NULL);
  /* A deadline in the past reads as a request, and tells the watchers. */
  HALI_CK_OK(hali_hal_stop_create(hali_test_now_ns() + 3600000000000LL,
                                  &stop));
  ck_assert_int_eq(hali_hal_stop_check(stop), HALI_STATUS_OK);
  hali_hal_stop_release(stop);
  HALI_CK_OK(hali_hal_stop_create(hali_test_now_ns() - 1, &stop));
  atomic_store(&flag_a, false);
  ck_assert(hali_hal_stop_watch(stop, &a));
  ck_assert_int_eq(hali_hal_stop_check(stop), HALI_STATUS_DEADLINE_EXCEEDED);
  ck_assert(atomic_load(&flag_a));
  ck_assert_int_eq(atomic_load(&code_a), HALI_STATUS_DEADLINE_EXCEEDED);
  hali_hal_stop_unwatch(stop, &a);
  hali_hal_stop_release(stop);
}
END_TEST

/* Host-visible semaphores (deadlock detection): a fence's mark reaches the
 * semaphores of its points, and a fence "may be signalled by the host"
 * when an unreached point is marked (or a point failed). */
START_TEST(test_fence_host_visibility) {
  hali_hal_fence_t *a = NULL, *b = NULL, *joined = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&a));
  HALI_CK_OK(hali_hal_fence_create_pending(&b));
  hali_hal_fence_t *both[] = {a, b};
  HALI_CK_OK(hali_hal_fence_join(both, 2, &joined));
  ck_assert(!hali_hal_fence_host_may_signal(joined));
  hali_hal_fence_mark_host_visible(b);
  ck_assert(hali_hal_fence_host_may_signal(joined));
  ck_assert(!hali_hal_fence_host_may_signal(a));
  HALI_CK_OK(hali_hal_fence_signal(b)); /* reached: no longer counts */
  ck_assert(!hali_hal_fence_host_may_signal(joined));
  hali_hal_fence_fail(a, hali_status_make(HALI_STATUS_ABORTED, "gone"));
  ck_assert(hali_hal_fence_host_may_signal(joined)); /* the wait is over */
  hali_hal_fence_mark_host_visible(NULL);
  ck_assert(!hali_hal_fence_host_may_signal(NULL));
  hali_hal_fence_release(joined);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
}
END_TEST

/* ---- device-made objects: pooled ---- */

/* Host allocations and resizes while |counting| is set (thread-safe: the
 * local-task runner allocates through the same hook). */
static long pooled_allocs;
static int pooled_counting;

static void *pooled_hook(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (__atomic_load_n(&pooled_counting, __ATOMIC_RELAXED))
    __atomic_add_fetch(&pooled_allocs, 1, __ATOMIC_RELAXED);
  return realloc(ptr, size);
}

/* bench/hal's sequence through the device: command buffer and fence made
 * by |device|, a 4 KiB fill, execute with a signal fence, await. */
static void pooled_sequence(hali_hal_device_t *device,
                            hali_hal_buffer_t *buffer, uint32_t pattern) {
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0, 4096, pattern, 4));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_device_create_fence(device, &signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
  hali_hal_command_buffer_release(cb);
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  hali_hal_fence_release(signal);
}

/* A warm device-made sequence allocates nothing on either device: the
 * command buffer, the fence (with its semaphore) and the submission come
 * back to the device and are reused.  The results are those of the
 * sequences all the same (each fill's pattern read back). */
START_TEST(test_device_sequence_allocates_nothing) {
  /* Nothing of the library's is live (this case runs first), so the
   * counting allocator can be installed. */
  HALI_CK_OK(hali_set_host_allocator(pooled_hook, NULL));
  static const hali_hal_device_kind_t kinds[] = {HALI_HAL_DEVICE_LOCAL_SYNC,
                                                 HALI_HAL_DEVICE_LOCAL_TASK};
  for (size_t k = 0; k < 2; ++k) {
    hali_hal_device_params_t dp;
    hali_hal_device_params_initialize(&dp);
    dp.kind = kinds[k];
    dp.worker_count = 1;
    hali_hal_device_t *device = NULL;
    HALI_CK_OK(hali_hal_device_create(&dp, &device));
    hali_hal_buffer_t *buffer =
        hali_test_allocate(hali_hal_device_allocator(device), 4096);
    pooled_sequence(device, buffer, 0x01010101u); /* warm */
    pooled_sequence(device, buffer, 0x02020202u);
    __atomic_store_n(&pooled_allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pooled_counting, 1, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < 20; ++i) {
      pooled_sequence(device, buffer, 0x10101010u * (i % 15 + 1));
      uint32_t words[2];
      HALI_CK_OK(hali_hal_buffer_read(buffer, 4088, words, sizeof(words)));
      ck_assert_uint_eq(words[0], 0x10101010u * (i % 15 + 1));
      ck_assert_uint_eq(words[1], 0x10101010u * (i % 15 + 1));
    }
    __atomic_store_n(&pooled_counting, 0, __ATOMIC_RELAXED);
    ck_assert_msg(pooled_allocs == 0,
                  "device kind %d: %ld host allocations in 20 warm sequences",
                  (int)kinds[k], pooled_allocs);

    /* Device-made fences outlive their device, pooled or not. */
    hali_hal_fence_t *kept = NULL, *second = NULL;
    HALI_CK_OK(hali_hal_device_create_fence(device, &kept));
    HALI_CK_OK(hali_hal_device_create_fence(device, &second));
    ck_assert_ptr_ne(kept, second);
    /* A fresh pooled fence is pending, as hali_hal_fence_create_pending's. */
    bool ready = true;
    HALI_CK_OK(hali_hal_fence_query(kept, &ready));
    ck_assert(!ready);
    hali_hal_buffer_release(buffer);
    hali_hal_device_release(device);
    HALI_CK_OK(hali_hal_fence_signal(kept));
    HALI_CK_OK(hali_hal_fence_await(kept, 0));
    hali_hal_fence_fail(second, hali_status_make(HALI_STATUS_ABORTED, "late"));
    /* (Not HALI_CK_STATUS: its message text goes to the C library's
     * free, which the live count below would miss.) */
    ck_assert(hali_status_consume_code(hali_hal_fence_await(second, 0),
                                       HALI_STATUS_ABORTED));
    hali_hal_fence_release(second);
    hali_hal_fence_release(kept);
  }
  ck_assert_uint_eq(hali_host_allocations_live(), 0);
  HALI_CK_OK(hali_set_host_allocator(NULL, NULL));
}
END_TEST

static Suite *hal_objects_suite(void) {
  Suite *s = suite_create("hal-objects");
  /* First, so that it can install its counting allocator under CK_FORK=no
   * too (nothing else is live yet). */
  TCase *tc = tcase_create("device_pools");
  tcase_add_test(tc, test_device_sequence_allocates_nothing);
  suite_add_tcase(s, tc);
  tc = tcase_create("allocator");
  tcase_add_test(tc, test_allocator_statistics);
  tcase_add_test(tc, test_buffer_scalar_fast_agrees);
  tcase_add_test(tc, test_finalize_checks_dispatches);
  tcase_add_test(tc, test_allocator_limit);
  tcase_add_test(tc, test_allocator_storage_cache);
  tcase_add_test(tc, test_allocator_size_boundaries);
  tcase_add_test(tc, test_allocator_bits);
  suite_add_tcase(s, tc);
  tc = tcase_create("buffer");
  tcase_add_test(tc, test_buffer_subspan);
  tcase_add_test(tc, test_buffer_mapping_rules);
  tcase_add_test(tc, test_buffer_uncommitted);
  suite_add_tcase(s, tc);
  tc = tcase_create("buffer_view");
  tcase_add_test(tc, test_element_types);
  tcase_add_test(tc, test_view_size_errors);
  tcase_add_test(tc, test_view_size_boundaries);
  suite_add_tcase(s, tc);
  tc = tcase_create("executable");
  tcase_add_test(tc, test_executable_from_library);
  suite_add_tcase(s, tc);
  tc = tcase_create("command_buffer");
  tcase_add_checked_fixture(tc, recording_setup, recording_teardown);
  tcase_add_test(tc, test_record_fill_validation);
  tcase_add_test(tc, test_record_copy_validation);
  tcase_add_test(tc, test_record_dispatch_validation);
  tcase_add_test(tc, test_range_sites_boundaries);
  tcase_add_test(tc, test_record_dispatch_workgroup_limits);
  tcase_add_test(tc, test_record_interface_boundaries);
  tcase_add_test(tc, test_record_state_errors);
  tcase_add_test(tc, test_command_buffer_cache);
  tcase_add_test(tc, test_record_push_binding);
  tcase_add_test(tc, test_record_retains_executable_once);
  suite_add_tcase(s, tc);
  tc = tcase_create("semaphore");
  tcase_add_test(tc, test_semaphore_signal_query_wait);
  tcase_add_test(tc, test_semaphore_top_of_timeline);
  tcase_add_test(tc, test_semaphore_first_failure_wins);
  tcase_add_test(tc, test_semaphore_cross_thread);
  tcase_add_test(tc, test_semaphore_timepoints);
  suite_add_tcase(s, tc);
  tc = tcase_create("stop");
  tcase_add_test(tc, test_stop_requests_watchers_and_fuel);
  suite_add_tcase(s, tc);
  tc = tcase_create("fence");
  tcase_add_test(tc, test_fence_host_visibility);
  tcase_add_test(tc, test_fence_basics);
  tcase_add_test(tc, test_fence_failure);
  tcase_add_test(tc, test_fence_await_multi_point);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *runner = srunner_create(hal_objects_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? 1 : 0;
}
