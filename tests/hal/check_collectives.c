/* Channels and collectives (hal/channel.h, doc/collectives.md).
 *
 * Run alone (make check) every case runs on a channel of one rank and the
 * argument checks run too; tests/collectives.test also runs this program
 * under mpirun with 2, 3 and 4 ranks, where every kind, reduction and
 * element type is checked against a reference computed here from what each
 * rank sent.  The suite does not fork (CK_FORK=no is set in main): MPI
 * processes must not. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/number.h"
#include "hal/hal.h"
#include "tests/hal/hal_testutil.h"

static hali_hal_device_t *device;
static hali_hal_channel_t *channel;
static int32_t rank, ranks;

/* ---- values by element type, through double (all are small integers or
 * halves, exact in every type). */

static const hali_hal_element_type_t all_types[] = {
#define HALI_X(name, id, nt, bits) HALI_HAL_ELEMENT_TYPE_##id,
    HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
};
#define TYPE_COUNT (sizeof(all_types) / sizeof(all_types[0]))

static bool is_bool(hali_hal_element_type_t t) {
  return t == HALI_HAL_ELEMENT_TYPE_BOOL_8 || t == HALI_HAL_ELEMENT_TYPE_INT_1;
}
static bool is_float(hali_hal_element_type_t t) {
  hali_hal_numerical_type_t n = hali_hal_element_type_numerical_type(t);
  return n == HALI_HAL_NUMERICAL_TYPE_FLOAT_IEEE ||
         n == HALI_HAL_NUMERICAL_TYPE_FLOAT_BRAIN;
}

static void put(hali_hal_element_type_t t, void *p, size_t i, double v) {
  switch (t) {
    case HALI_HAL_ELEMENT_TYPE_FLOAT_16:
      ((uint16_t *)p)[i] = hali_f32_to_f16((float)v);
      return;
    case HALI_HAL_ELEMENT_TYPE_BFLOAT_16:
      ((uint16_t *)p)[i] = hali_f32_to_bf16((float)v);
      return;
    case HALI_HAL_ELEMENT_TYPE_FLOAT_32:
      ((float *)p)[i] = (float)v;
      return;
    case HALI_HAL_ELEMENT_TYPE_FLOAT_64:
      ((double *)p)[i] = v;
      return;
    default:
      break;
  }
  int64_t x = (int64_t)v;
  switch (hali_hal_element_type_byte_size(t)) {
    case 1: ((int8_t *)p)[i] = (int8_t)x; break;
    case 2: ((int16_t *)p)[i] = (int16_t)x; break;
    case 4: ((int32_t *)p)[i] = (int32_t)x; break;
    default: ((int64_t *)p)[i] = x; break;
  }
}

static double get(hali_hal_element_type_t t, const void *p, size_t i) {
  switch (t) {
    case HALI_HAL_ELEMENT_TYPE_FLOAT_16:
      return hali_f16_to_f32(((const uint16_t *)p)[i]);
    case HALI_HAL_ELEMENT_TYPE_BFLOAT_16:
      return hali_bf16_to_f32(((const uint16_t *)p)[i]);
    case HALI_HAL_ELEMENT_TYPE_FLOAT_32:
      return ((const float *)p)[i];
    case HALI_HAL_ELEMENT_TYPE_FLOAT_64:
      return ((const double *)p)[i];
    default:
      break;
  }
  bool u = hali_hal_element_type_numerical_type(t) ==
               HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED ||
           is_bool(t);
  switch (hali_hal_element_type_byte_size(t)) {
    case 1: return u ? (double)((const uint8_t *)p)[i]
                     : (double)((const int8_t *)p)[i];
    case 2: return u ? (double)((const uint16_t *)p)[i]
                     : (double)((const int16_t *)p)[i];
    case 4: return u ? (double)((const uint32_t *)p)[i]
                     : (double)((const int32_t *)p)[i];
    default:
      return u ? (double)((const uint64_t *)p)[i]
               : (double)((const int64_t *)p)[i];
  }
}

/* What rank |r| sends as element |i| for |reduction| (products stay small,
 * booleans are 0 or 1). */
static double value(hali_hal_element_type_t t, uint32_t reduction, int32_t r,
                    size_t i) {
  if (is_bool(t)) return (double)((i + (size_t)r) % 2);
  if (reduction == HALI_HAL_COLLECTIVE_REDUCTION_PRODUCT)
    return (double)((i + (size_t)r) % 2 + 1);
  double v = (double)((i * 3 + (size_t)r * 5) % 11) + 1;
  return is_float(t) ? v / 2 : v;
}

static double reduce_ref(hali_hal_element_type_t t, uint32_t reduction,
                         size_t i, size_t i_of_rank_stride) {
  double acc = 0;
  for (int32_t r = 0; r < ranks; ++r) {
    double v = value(t, reduction, r, i + i_of_rank_stride);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (reduction) {
      case HALI_HAL_COLLECTIVE_REDUCTION_PRODUCT:
        acc = is_bool(t) ? (acc && v) : acc * v;
        break;
      case HALI_HAL_COLLECTIVE_REDUCTION_MIN:
        acc = v < acc ? v : acc;
        break;
      case HALI_HAL_COLLECTIVE_REDUCTION_MAX:
        acc = v > acc ? v : acc;
        break;
      default:
        acc = is_bool(t) ? (acc || v) : acc + v;
        break;
    }
  }
  if (reduction == HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE)
    acc = is_float(t) ? acc / ranks : floor(acc / ranks);
  return acc;
}

/* ---- running one collective. */

static hali_hal_buffer_t *buffer_of(uint64_t bytes) {
  return hali_test_allocate(hali_hal_device_allocator(device),
                            bytes ? bytes : 8);
}

/* Records |op| over |ch| with buffers of the lengths it needs, fills the
 * send buffer with value(), runs it and returns the receive buffer's host
 * pointer in *out_recv (owned by *out_buffer). */
static hali_status_t run_on(hali_hal_channel_t *ch,
                            const hali_hal_collective_t *op,
                            hali_hal_buffer_t **out_buffer, void **out_recv,
                            uint64_t *out_recv_length) {
  uint64_t sl = 0, rl = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_hal_collective_lengths(ch, op, &sl, &rl));
  hali_hal_buffer_t *send = buffer_of(sl), *recv = buffer_of(rl);
  void *sp = NULL, *rp = NULL;
  HALI_CK_OK(hali_hal_buffer_map_range(send, 0, HALI_HAL_WHOLE_BUFFER, &sp));
  HALI_CK_OK(hali_hal_buffer_map_range(recv, 0, HALI_HAL_WHOLE_BUFFER, &rp));
  size_t es = hali_hal_element_type_byte_size(op->element_type);
  for (size_t i = 0; i < sl / es; ++i)
    put(op->element_type, sp, i, value(op->element_type, op->reduction,
                                       hali_hal_channel_rank(ch), i));
  memset(rp, 0xA5, rl ? rl : 8);
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  hali_status_t s = hali_hal_command_buffer_collective(
      cb, ch, op, send, 0, sl, recv, 0, rl);
  if (!s) HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = NULL;
  if (!s) HALI_CK_OK(hali_hal_device_create_fence(device, &signal));
  if (!s)
    s = hali_hal_device_queue_execute(device, NULL, signal, &cb, 1);
  if (!s) s = hali_hal_fence_await(signal, HALI_INFINITE);
  hali_hal_fence_release(signal);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(send);
  if (s) {
    hali_hal_buffer_release(recv);
    return s;
  }
  *out_buffer = recv;
  *out_recv = rp;
  *out_recv_length = rl;
  return HALI_OK;
}

static void check_value(hali_hal_element_type_t t, const void *p, size_t i,
                        double want, const char *what) {
  double got = get(t, p, i);
  double tol = t == HALI_HAL_ELEMENT_TYPE_FLOAT_16 ||
                       t == HALI_HAL_ELEMENT_TYPE_BFLOAT_16
                   ? 1e-2 * fabs(want)
                   : 1e-6 * fabs(want);
  ck_assert_msg(fabs(got - want) <= tol,
                "%s, element type 0x%08x, rank %d of %d, element %zu: got %g, "
                "want %g",
                what, t, rank, ranks, i, got, want);
}

static const size_t N = 12; /* divisible by 1, 2, 3 and 4 */

static void reducing_case(hali_hal_collective_kind_t kind) {
  for (size_t ti = 0; ti < TYPE_COUNT; ++ti) {
    hali_hal_element_type_t t = all_types[ti];
    for (uint32_t red = 1; red < HALI_HAL_COLLECTIVE_REDUCTION_COUNT_; ++red) {
      if (is_bool(t) && red == HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE) continue;
      hali_hal_collective_t op = {kind, red, t, 0, N};
      hali_hal_buffer_t *b = NULL;
      void *rp = NULL;
      uint64_t rl = 0;
      HALI_CK_OK(run_on(channel, &op, &b, &rp, &rl));
      char what[96];
      snprintf(what, sizeof(what), "%s(%s)",
               hali_hal_collective_kind_name(kind),
               hali_hal_collective_reduction_name(red));
      if (rl)
        for (size_t i = 0; i < N; ++i)
          check_value(t, rp, i,
                      reduce_ref(t, red, i,
                                 kind == HALI_HAL_COLLECTIVE_REDUCE_SCATTER
                                     ? (size_t)rank * N
                                     : 0),
                      what);
      hali_hal_buffer_release(b);
    }
  }
}

START_TEST(all_reduce) { reducing_case(HALI_HAL_COLLECTIVE_ALL_REDUCE); }
END_TEST

START_TEST(reduce) {
  reducing_case(HALI_HAL_COLLECTIVE_REDUCE);
}
END_TEST

START_TEST(reduce_scatter) {
  reducing_case(HALI_HAL_COLLECTIVE_REDUCE_SCATTER);
}
END_TEST

START_TEST(all_gather) {
  for (size_t ti = 0; ti < TYPE_COUNT; ++ti) {
    hali_hal_element_type_t t = all_types[ti];
    hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_GATHER, 0, t, 0, N};
    hali_hal_buffer_t *b = NULL;
    void *rp = NULL;
    uint64_t rl = 0;
    HALI_CK_OK(run_on(channel, &op, &b, &rp, &rl));
    ck_assert_uint_eq(rl, N * (size_t)ranks *
                              hali_hal_element_type_byte_size(t));
    for (int32_t r = 0; r < ranks; ++r)
      for (size_t i = 0; i < N; ++i)
        check_value(t, rp, (size_t)r * N + i, value(t, 0, r, i), "all_gather");
    hali_hal_buffer_release(b);
  }
}
END_TEST

START_TEST(all_to_all) {
  for (size_t ti = 0; ti < TYPE_COUNT; ++ti) {
    hali_hal_element_type_t t = all_types[ti];
    hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_TO_ALL, 0, t, 0, N};
    hali_hal_buffer_t *b = NULL;
    void *rp = NULL;
    uint64_t rl = 0;
    HALI_CK_OK(run_on(channel, &op, &b, &rp, &rl));
    size_t c = N / (size_t)ranks;
    /* Chunk j of what I receive is chunk |rank| of what rank j sent. */
    for (int32_t j = 0; j < ranks; ++j)
      for (size_t k = 0; k < c; ++k)
        check_value(t, rp, (size_t)j * c + k,
                    value(t, 0, j, (size_t)rank * c + k), "all_to_all");
    hali_hal_buffer_release(b);
  }
}
END_TEST

START_TEST(broadcast) {
  for (size_t ti = 0; ti < TYPE_COUNT; ++ti) {
    hali_hal_element_type_t t = all_types[ti];
    int32_t root = ranks - 1;
    hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_BROADCAST, 0, t, root, N};
    hali_hal_buffer_t *b = NULL;
    void *rp = NULL;
    uint64_t rl = 0;
    HALI_CK_OK(run_on(channel, &op, &b, &rp, &rl));
    for (size_t i = 0; i < N; ++i)
      check_value(t, rp, i, value(t, 0, root, i), "broadcast");
    hali_hal_buffer_release(b);
  }
}
END_TEST

START_TEST(send_recv) {
  /* Pairs (0, 1), (2, 3), ...; an odd rank out sits this one out. */
  int32_t peer = rank ^ 1;
  if (peer >= ranks) return;
  for (size_t ti = 0; ti < TYPE_COUNT; ++ti) {
    hali_hal_element_type_t t = all_types[ti];
    hali_hal_collective_t op = {rank % 2 ? HALI_HAL_COLLECTIVE_RECV
                                         : HALI_HAL_COLLECTIVE_SEND,
                                0, t, peer, N};
    hali_hal_buffer_t *b = NULL;
    void *rp = NULL;
    uint64_t rl = 0;
    HALI_CK_OK(run_on(channel, &op, &b, &rp, &rl));
    if (rank % 2)
      for (size_t i = 0; i < N; ++i)
        check_value(t, rp, i, value(t, 0, peer, i), "recv");
    hali_hal_buffer_release(b);
  }
}
END_TEST

START_TEST(split) {
  /* Even and odd ranks; the new channel orders by descending world rank. */
  hali_hal_channel_t *half = NULL;
  HALI_CK_OK(hali_hal_channel_split(channel, rank % 2, -rank, &half));
  int32_t members = (ranks - rank % 2 + 1) / 2;
  ck_assert_int_eq(hali_hal_channel_count(half), members);
  hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_REDUCE,
                              HALI_HAL_COLLECTIVE_REDUCTION_SUM,
                              HALI_HAL_ELEMENT_TYPE_INT_32, 0, 1};
  hali_hal_buffer_t *b = NULL;
  void *rp = NULL;
  uint64_t rl = 0;
  HALI_CK_OK(run_on(half, &op, &b, &rp, &rl));
  /* Each rank of the half sent value(..., its rank in the half, 0). */
  int32_t want = 0;
  for (int32_t r = 0; r < members; ++r)
    want += (int32_t)value(HALI_HAL_ELEMENT_TYPE_INT_32, 1, r, 0);
  ck_assert_int_eq(*(int32_t *)rp, want);
  hali_hal_buffer_release(b);
  hali_hal_channel_release(half);
  /* A negative color: this rank alone. */
  HALI_CK_OK(hali_hal_channel_split(channel, -1, 0, &half));
  ck_assert_int_eq(hali_hal_channel_count(half), 1);
  ck_assert_int_eq(hali_hal_channel_rank(half), 0);
  hali_hal_channel_release(half);
}
END_TEST

/* ---- argument checks (on a one-rank channel: no peers needed). */

static hali_status_t lengths(hali_hal_collective_kind_t kind, uint32_t red,
                             hali_hal_element_type_t t, int32_t param,
                             uint64_t count) {
  hali_hal_channel_t *one = NULL;
  HALI_CK_OK(hali_hal_channel_create_local(0, &one));
  hali_hal_collective_t op = {kind, red, t, param, count};
  uint64_t sl, rl;
  hali_status_t s = hali_hal_collective_lengths(one, &op, &sl, &rl);
  hali_hal_channel_release(one);
  return s;
}

START_TEST(bad_arguments) {
  const hali_hal_element_type_t f32 = HALI_HAL_ELEMENT_TYPE_FLOAT_32;
  HALI_CK_STATUS(lengths(8, 0, f32, 0, 1), HALI_STATUS_INVALID_ARGUMENT,
                 "collective kind 8 is unknown");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_REDUCE, 0, f32, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "all_reduce needs a reduction");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_REDUCE, 9, f32, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "all_reduce: reduction 9 is unknown");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_GATHER, 1, f32, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "all_gather takes no reduction (got sum)");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_GATHER, 0, 0x12345678u, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "element type 0x12345678 is not a HAL element type");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_REDUCE, 5,
                         HALI_HAL_ELEMENT_TYPE_BOOL_8, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "an average of bool elements is not defined");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_BROADCAST, 0, f32, 1, 1),
                 HALI_STATUS_OUT_OF_RANGE,
                 "broadcast: root 1 is not a rank of the channel (0 to 0)");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_REDUCE, 1, f32, -1, 1),
                 HALI_STATUS_OUT_OF_RANGE, "root -1 is not a rank");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_SEND, 0, f32, 0, 1),
                 HALI_STATUS_INVALID_ARGUMENT, "send: peer 0 is this rank");
  HALI_CK_STATUS(lengths(HALI_HAL_COLLECTIVE_ALL_GATHER, 0, f32, 0,
                         (uint64_t)INT32_MAX + 1),
                 HALI_STATUS_OUT_OF_RANGE,
                 "2147483648 elements is more than one collective moves");
  /* Boundaries: 0 and 2^31-1 elements are accepted, 2^31-1 x 8 bytes does
   * not overflow. */
  HALI_CK_OK(lengths(HALI_HAL_COLLECTIVE_ALL_GATHER, 0, f32, 0, 0));
  HALI_CK_OK(lengths(HALI_HAL_COLLECTIVE_ALL_GATHER, 0,
                     HALI_HAL_ELEMENT_TYPE_FLOAT_64, 0, INT32_MAX));
  /* Record-time range checks. */
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, 0, HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  hali_hal_buffer_t *a = buffer_of(64), *b = buffer_of(64);
  hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_REDUCE,
                              HALI_HAL_COLLECTIVE_REDUCTION_SUM, f32, 0, 4};
  HALI_CK_STATUS(hali_hal_command_buffer_collective(cb, channel, &op, a, 0, 12,
                                                    b, 0, 16),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "all_reduce: the send range is 12 bytes; this rank sends "
                 "exactly 16");
  HALI_CK_STATUS(hali_hal_command_buffer_collective(cb, channel, &op, a, 56, 16,
                                                    b, 0, 16),
                 HALI_STATUS_OUT_OF_RANGE, "all_reduce");
  HALI_CK_STATUS(hali_hal_command_buffer_collective(cb, channel, &op, a, 0, 16,
                                                    NULL, 0, 16),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "all_reduce needs a receive buffer of 16 bytes");
  HALI_CK_STATUS(hali_hal_command_buffer_collective(cb, channel, &op, a, 0, 16,
                                                    a, 8, 16),
                 HALI_STATUS_INVALID_ARGUMENT,
                 "the send range [0, 16) and the receive range [8, 24) "
                 "overlap");
  HALI_CK_OK(hali_hal_command_buffer_collective(cb, channel, &op, a, 0, 16, a,
                                                16, HALI_HAL_WHOLE_BUFFER));
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(cb), 1);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  hali_hal_command_buffer_release(cb);
}
END_TEST

START_TEST(one_rank_channel) {
  /* Alone, every collective gives back what this rank sent. */
  hali_hal_channel_t *one = NULL;
  HALI_CK_OK(hali_hal_channel_create_local(0, &one));
  ck_assert_int_eq(hali_hal_channel_rank(one), 0);
  ck_assert_int_eq(hali_hal_channel_count(one), 1);
  ck_assert(!hali_hal_channel_is_mpi(one));
  hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_REDUCE,
                              HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE,
                              HALI_HAL_ELEMENT_TYPE_FLOAT_32, 0, N};
  hali_hal_buffer_t *b = NULL;
  void *rp = NULL;
  uint64_t rl = 0;
  HALI_CK_OK(run_on(one, &op, &b, &rp, &rl));
  for (size_t i = 0; i < N; ++i)
    check_value(op.element_type, rp, i,
                value(op.element_type, op.reduction, 0, i), "one rank");
  hali_hal_buffer_release(b);
  hali_hal_channel_release(one);
}
END_TEST

START_TEST(failed_wait_skips_collective) {
  /* A submission whose wait fence failed never runs its collective; the
   * peers are told (here: none) and the signal fence carries the reason. */
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
  hali_hal_buffer_t *a = buffer_of(16 * (uint64_t)ranks), *b = buffer_of(16);
  hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_REDUCE_SCATTER,
                              HALI_HAL_COLLECTIVE_REDUCTION_SUM,
                              HALI_HAL_ELEMENT_TYPE_INT_32, 0, 4};
  HALI_CK_OK(hali_hal_command_buffer_collective(
      cb, channel, &op, a, 0, 16 * (uint64_t)ranks, b, 0, 16));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *wait = NULL, *signal = NULL;
  HALI_CK_OK(hali_hal_device_create_fence(device, &wait));
  HALI_CK_OK(hali_hal_device_create_fence(device, &signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, wait, signal, &cb, 1));
  hali_hal_fence_fail(wait, hali_status_make(HALI_STATUS_INTERNAL,
                                             "the kernel before it failed"));
  HALI_CK_STATUS(hali_hal_fence_await(signal, HALI_INFINITE),
                 HALI_STATUS_INTERNAL, "the kernel before it failed");
  hali_hal_fence_release(wait);
  hali_hal_fence_release(signal);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
}
END_TEST

START_TEST(validation_sees_collectives) {
  /* Under validation a collective reads its send range and writes its
   * receive range: a fill of the send buffer with no barrier before the
   * collective is a read-after-write hazard, and with the barrier the
   * received bytes count as written. */
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.validate = 1;
  hali_hal_device_t *vd = NULL;
  HALI_CK_OK(hali_hal_device_create(&p, &vd));
  hali_hal_channel_t *one = NULL;
  HALI_CK_OK(hali_hal_channel_create_local(0, &one));
  hali_hal_allocator_t *a = hali_hal_device_allocator(vd);
  hali_hal_buffer_t *send = hali_test_allocate(a, 16);
  hali_hal_buffer_t *recv = hali_test_allocate(a, 16);
  hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_REDUCE,
                              HALI_HAL_COLLECTIVE_REDUCTION_SUM,
                              HALI_HAL_ELEMENT_TYPE_INT_32, 0, 4};
  for (int barrier = 0; barrier < 2; ++barrier) {
    hali_hal_command_buffer_t *cb = NULL;
    HALI_CK_OK(hali_hal_device_create_command_buffer(
        vd, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
        HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
    HALI_CK_OK(hali_hal_command_buffer_fill(cb, send, 0, 16, 3, 4));
    if (barrier) HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
    HALI_CK_OK(hali_hal_command_buffer_collective(cb, one, &op, send, 0, 16,
                                                  recv, 0, 16));
    if (!barrier) {
      HALI_CK_STATUS(hali_hal_command_buffer_finalize(cb),
                     HALI_STATUS_FAILED_PRECONDITION,
                     "read-after-write hazard",
                     "(collective all_reduce) reads bytes [0, 16)");
    } else {
      HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
      hali_hal_fence_t *f = NULL;
      HALI_CK_OK(hali_hal_device_create_fence(vd, &f));
      HALI_CK_OK(hali_hal_device_queue_execute(vd, NULL, f, &cb, 1));
      HALI_CK_OK(hali_hal_fence_await(f, HALI_INFINITE));
      /* Validation learns that the host saw the work end from wait_idle
       * (or the C API's fence awaits). */
      HALI_CK_OK(hali_hal_device_wait_idle(vd, HALI_INFINITE));
      int32_t got[4];
      HALI_CK_OK(hali_hal_buffer_read(recv, 0, got, sizeof(got)));
      ck_assert_int_eq(got[3], 3);
      hali_hal_fence_release(f);
    }
    hali_hal_command_buffer_release(cb);
  }
  hali_hal_buffer_release(send);
  hali_hal_buffer_release(recv);
  hali_hal_channel_release(one);
  hali_hal_device_release(vd);
}
END_TEST

int main(void) {
  /* MPI processes must not fork. */
  setenv("CK_FORK", "no", 1);
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  if (getenv("HALI_TEST_DEVICE") &&
      strcmp(getenv("HALI_TEST_DEVICE"), "local-task") == 0)
    p.kind = HALI_HAL_DEVICE_LOCAL_TASK, p.worker_count = 1;
  hali_status_t s = hali_hal_device_create(&p, &device);
  if (!s) s = hali_hal_device_default_channel(device, &channel);
  if (s) {
    fprintf(stderr, "%s\n", hali_status_message(s));
    return 1;
  }
  rank = hali_hal_channel_rank(channel);
  ranks = hali_hal_channel_count(channel);
  Suite *suite = suite_create("collectives");
  TCase *tc = tcase_create("collectives");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, all_reduce);
  tcase_add_test(tc, reduce);
  tcase_add_test(tc, reduce_scatter);
  tcase_add_test(tc, all_gather);
  tcase_add_test(tc, all_to_all);
  tcase_add_test(tc, broadcast);
  tcase_add_test(tc, send_recv);
  tcase_add_test(tc, split);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, one_rank_channel);
  tcase_add_test(tc, failed_wait_skips_collective);
  tcase_add_test(tc, validation_sees_collectives);
  suite_add_tcase(suite, tc);
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  hali_hal_channel_release(channel);
  hali_hal_device_release(device);
  return failed ? 1 : 0;
}
