/* hali HAL — channels and collectives (see hal/channel.h). */
#include "hal/channel.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/number.h"
#include "config.h"

#ifdef HALI_HAVE_MPI
#include <mpi.h>
#endif

struct hali_hal_channel_t {
  hali_ref_t ref;
  int32_t rank;
  int32_t count;
  hali_timeout_ns_t timeout_ns;
  pthread_mutex_t mu;  /* guards seq and broken */
  uint64_t seq;        /* collectives started on this channel */
  hali_status_t broken; /* why every later collective fails at once */
#ifdef HALI_HAVE_MPI
  bool mpi;
  MPI_Comm comm; /* owned (a duplicate) */
#endif
};

static const char *const kind_names[HALI_HAL_COLLECTIVE_KIND_COUNT_] = {
    "all_gather", "all_reduce",     "all_to_all", "broadcast",
    "reduce",     "reduce_scatter", "send",       "recv",
};
static const char *const reduction_names[HALI_HAL_COLLECTIVE_REDUCTION_COUNT_] =
    {"none", "sum", "product", "min", "max", "average"};

const char *hali_hal_collective_kind_name(uint32_t kind) {
  return kind < HALI_HAL_COLLECTIVE_KIND_COUNT_ ? kind_names[kind] : "?";
}
const char *hali_hal_collective_reduction_name(uint32_t reduction) {
  return reduction < HALI_HAL_COLLECTIVE_REDUCTION_COUNT_
             ? reduction_names[reduction]
             : "?";
}

static const char *element_name(hali_hal_element_type_t t) {
  switch (t) {
#define HALI_X(name, id, nt, bits)                                             \
  case HALI_HAL_ELEMENT_TYPE_##id:                                             \
    return name;
    HALI_HAL_ELEMENT_TYPES(HALI_X)
#undef HALI_X
    default:
      return NULL;
  }
}

/* "all_reduce(sum) of 256 x f32" */
static void describe(const hali_hal_collective_t *op, char *out, size_t n) {
  const char *et = element_name(op->element_type);
  int k = snprintf(out, n, "%s", hali_hal_collective_kind_name(op->kind));
  if (k < 0 || (size_t)k >= n) return;
  if (op->reduction != HALI_HAL_COLLECTIVE_REDUCTION_NONE)
    k += snprintf(out + k, n - (size_t)k, "(%s)",
                  hali_hal_collective_reduction_name(op->reduction));
  if (k < 0 || (size_t)k >= n) return;
  k += snprintf(out + k, n - (size_t)k, " of %" PRIu64 " x %s", op->count,
                et ? et : "?");
  if (k < 0 || (size_t)k >= n) return;
  if (op->kind == HALI_HAL_COLLECTIVE_BROADCAST ||
      op->kind == HALI_HAL_COLLECTIVE_REDUCE)
    snprintf(out + k, n - (size_t)k, " at root %d", op->param);
  else if (op->kind == HALI_HAL_COLLECTIVE_SEND)
    snprintf(out + k, n - (size_t)k, " to rank %d", op->param);
  else if (op->kind == HALI_HAL_COLLECTIVE_RECV)
    snprintf(out + k, n - (size_t)k, " from rank %d", op->param);
}

/* ---- MPI: process state. ---- */

#ifdef HALI_HAVE_MPI
/* Every MPI call hali makes holds this lock: hali asks for
 * MPI_THREAD_MULTIPLE but works with less, and the queue threads of several
 * devices may run collectives at once. */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;
/* 0 not looked at yet, 1 hali initialized MPI, 2 the host did, -1 no MPI
 * launcher (every default channel has one rank). */
static int mpi_state;
/* Set when a collective timed out: its request can never complete, so
 * MPI_Finalize could hang; the exit handler aborts the job instead. */
static bool mpi_stuck;
/* MPI_Init_thread gave MPI_THREAD_MULTIPLE: blocking calls need no lock. */
static bool mpi_multiple;

static void mpi_at_exit(void) {
  pthread_mutex_lock(&mpi_mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (mpi_stuck) {
      fflush(stdout);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
  }
  pthread_mutex_unlock(&mpi_mu);
}

static bool launched_by_mpi(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                     "PMI_RANK", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); ++i)
    if (getenv(vars[i])) return true;
  return false;
}

static hali_status_t mpi_error(int code, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
  return hali_status_make(HALI_STATUS_INTERNAL, "%s failed: %s", what,
                          len ? text : "unknown MPI error");
}

/* With mpi_mu held: 1 or 2 when MPI is usable, -1 when not launched. */
static int mpi_ensure(hali_status_t *out_status) {
  *out_status = HALI_OK;
  if (mpi_state != 0) return mpi_state;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    int provided = 0;
    MPI_Query_thread(&provided);
    mpi_multiple = provided == MPI_THREAD_MULTIPLE;
    mpi_state = 2;
  } else if (!launched_by_mpi()) {
    mpi_state = -1;
  } else {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      *out_status = mpi_error(rc, "MPI_Init_thread");
      return 0;
    }
    mpi_state = 1;
    mpi_multiple = provided == MPI_THREAD_MULTIPLE;
    atexit(mpi_at_exit);
  }
  return mpi_state;
}
#endif /* HALI_HAVE_MPI */

/* ---- channel objects. ---- */

static void channel_destroy(hali_ref_t *ref) {
  hali_hal_channel_t *ch = (hali_hal_channel_t *)ref;
#ifdef HALI_HAVE_MPI
  if (ch->mpi) {
    pthread_mutex_lock(&mpi_mu);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !ch->broken) MPI_Comm_free(&ch->comm);
    pthread_mutex_unlock(&mpi_mu);
  }
#endif
  hali_status_free(ch->broken);
  pthread_mutex_destroy(&ch->mu);
  hali_free(ch);
}

static const hali_ref_vtable_t channel_vtable = {.destroy = channel_destroy};

static hali_status_t channel_new(int32_t rank, int32_t count,
                                 hali_timeout_ns_t timeout_ns,
                                 hali_hal_channel_t **out) {
  hali_hal_channel_t *ch = hali_calloc(1, sizeof(*ch));
  if (!ch) return hali_status_oom();
  hali_ref_init(&ch->ref, HALI_TYPE_CHANNEL, &channel_vtable);
  ch->rank = rank;
  ch->count = count;
  ch->timeout_ns = timeout_ns;
  pthread_mutex_init(&ch->mu, NULL);
  *out = ch;
  return HALI_OK;
}

hali_status_t hali_hal_channel_create_local(hali_timeout_ns_t timeout_ns,
                                            hali_hal_channel_t **out_channel) {
  *out_channel = NULL;
  return channel_new(0, 1, timeout_ns, out_channel);
}

#ifdef HALI_HAVE_MPI
/* With mpi_mu held: a channel over a duplicate of |comm|. */
static hali_status_t channel_over(MPI_Comm comm, hali_timeout_ns_t timeout_ns,
                                  hali_hal_channel_t **out) {
  MPI_Comm dup;
  int rc = MPI_Comm_dup(comm, &dup);
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  hali_status_t s = channel_new(rank, size, timeout_ns, out);
  if (s) {
    MPI_Comm_free(&dup);
    return s;
  }
  (*out)->mpi = true;
  (*out)->comm = dup;
  return HALI_OK;
}
#endif

hali_status_t hali_hal_channel_create_default(
    hali_timeout_ns_t timeout_ns, hali_hal_channel_t **out_channel) {
  *out_channel = NULL;
#ifdef HALI_HAVE_MPI
  pthread_mutex_lock(&mpi_mu);
  hali_status_t s = HALI_OK;
  int state = mpi_ensure(&s);
  if (state > 0) s = channel_over(MPI_COMM_WORLD, timeout_ns, out_channel);
  pthread_mutex_unlock(&mpi_mu);
  if (s || state > 0) return s;
#endif
  return hali_hal_channel_create_local(timeout_ns, out_channel);
}

hali_status_t hali_hal_channel_world(int32_t *out_rank, int32_t *out_count) {
  *out_rank = 0;
  *out_count = 1;
#ifdef HALI_HAVE_MPI
  pthread_mutex_lock(&mpi_mu);
  hali_status_t s = HALI_OK;
  if (mpi_ensure(&s) > 0) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *out_rank = rank;
    *out_count = size;
  }
  pthread_mutex_unlock(&mpi_mu);
  return s;
#else
  return HALI_OK;
#endif
}

hali_status_t hali_hal_channel_create_from_mpi(
    const void *mpi_comm, hali_timeout_ns_t timeout_ns,
    hali_hal_channel_t **out_channel) {
  *out_channel = NULL;
#ifdef HALI_HAVE_MPI
  if (!mpi_comm)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "no MPI communicator given");
  pthread_mutex_lock(&mpi_mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  hali_status_t s;
  if (!initialized) {
    s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                         "MPI is not initialized: call MPI_Init before "
                         "giving hali a communicator");
  } else {
    if (mpi_state == 0 || mpi_state == -1) {
      int provided = 0;
      MPI_Query_thread(&provided);
      mpi_multiple = provided == MPI_THREAD_MULTIPLE;
      mpi_state = 2;
    }
    s = channel_over(*(const MPI_Comm *)mpi_comm, timeout_ns, out_channel);
  }
  pthread_mutex_unlock(&mpi_mu);
  return s;
#else
  (void)mpi_comm;
  (void)timeout_ns;
  return hali_status_make(HALI_STATUS_UNAVAILABLE,
                          "hali was built without MPI (configure found no "
                          "Open MPI, or --without-mpi)");
#endif
}

hali_status_t hali_hal_channel_split(hali_hal_channel_t *channel,
                                     int32_t color, int32_t key,
                                     hali_hal_channel_t **out_channel) {
  *out_channel = NULL;
#ifdef HALI_HAVE_MPI
  if (channel->mpi) {
    pthread_mutex_lock(&mpi_mu);
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(channel->comm, color < 0 ? MPI_UNDEFINED : color,
                            key, &sub);
    hali_status_t s = HALI_OK;
    if (rc != MPI_SUCCESS) {
      s = mpi_error(rc, "MPI_Comm_split");
    } else if (sub != MPI_COMM_NULL) {
      s = channel_over(sub, channel->timeout_ns, out_channel);
      MPI_Comm_free(&sub);
    }
    pthread_mutex_unlock(&mpi_mu);
    if (s || *out_channel) return s;
  }
#endif
  (void)key;
  (void)color;
  return channel_new(0, 1, channel->timeout_ns, out_channel);
}

void hali_hal_channel_retain(hali_hal_channel_t *channel) {
  if (channel) hali_ref_retain(&channel->ref);
}
void hali_hal_channel_release(hali_hal_channel_t *channel) {
  if (channel) hali_ref_release(&channel->ref);
}
int32_t hali_hal_channel_rank(const hali_hal_channel_t *channel) {
  return channel->rank;
}
int32_t hali_hal_channel_count(const hali_hal_channel_t *channel) {
  return channel->count;
}
bool hali_hal_channel_is_mpi(const hali_hal_channel_t *channel) {
#ifdef HALI_HAVE_MPI
  return channel->mpi;
#else
  (void)channel;
  return false;
#endif
}

/* ---- checking a collective. ---- */

static bool is_reducing(uint32_t kind) {
  return kind == HALI_HAL_COLLECTIVE_ALL_REDUCE ||
         kind == HALI_HAL_COLLECTIVE_REDUCE ||
         kind == HALI_HAL_COLLECTIVE_REDUCE_SCATTER;
}

static bool is_boolean(hali_hal_element_type_t t) {
  return t == HALI_HAL_ELEMENT_TYPE_BOOL_8 || t == HALI_HAL_ELEMENT_TYPE_INT_1;
}

hali_status_t hali_hal_collective_lengths(const hali_hal_channel_t *channel,
                                          const hali_hal_collective_t *op,
                                          uint64_t *out_send_length,
                                          uint64_t *out_recv_length) {
  *out_send_length = *out_recv_length = 0;
  if ((uint32_t)op->kind >= HALI_HAL_COLLECTIVE_KIND_COUNT_)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "collective kind %u is unknown (0 all_gather, 1 "
                            "all_reduce, 2 all_to_all, 3 broadcast, 4 reduce, "
                            "5 reduce_scatter, 6 send, 7 recv)",
                            (unsigned)op->kind);
  const char *kind = kind_names[op->kind];
  if ((uint32_t)op->reduction >= HALI_HAL_COLLECTIVE_REDUCTION_COUNT_)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: reduction %u is unknown (1 sum, 2 product, "
                            "3 min, 4 max, 5 average)",
                            kind, (unsigned)op->reduction);
  if (is_reducing(op->kind) &&
      op->reduction == HALI_HAL_COLLECTIVE_REDUCTION_NONE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s needs a reduction (sum, product, min, max or "
                            "average)",
                            kind);
  if (!is_reducing(op->kind) &&
      op->reduction != HALI_HAL_COLLECTIVE_REDUCTION_NONE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s takes no reduction (got %s)", kind,
                            reduction_names[op->reduction]);
  const char *et = element_name(op->element_type);
  if (!et)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: element type 0x%08x is not a HAL element "
                            "type",
                            kind, op->element_type);
  if (is_boolean(op->element_type) &&
      op->reduction == HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: an average of %s elements is not defined "
                            "(sum is or, product is and)",
                            kind, et);
  bool rooted = op->kind == HALI_HAL_COLLECTIVE_BROADCAST ||
                op->kind == HALI_HAL_COLLECTIVE_REDUCE;
  bool p2p = op->kind == HALI_HAL_COLLECTIVE_SEND ||
             op->kind == HALI_HAL_COLLECTIVE_RECV;
  if ((rooted || p2p) && (op->param < 0 || op->param >= channel->count))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: %s %d is not a rank of the channel (0 to %d)",
                            kind, rooted ? "root" : "peer", op->param,
                            channel->count - 1);
  if (p2p && op->param == channel->rank)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "%s: peer %d is this rank", kind, op->param);
  if (op->count > INT32_MAX)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: %" PRIu64 " elements is more than one "
                            "collective moves (2^31-1)",
                            kind, op->count);
  uint64_t ranks = (uint64_t)channel->count;
  if (op->kind == HALI_HAL_COLLECTIVE_ALL_TO_ALL && op->count % ranks)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "all_to_all: %" PRIu64 " elements do not split "
                            "evenly over %" PRIu64 " ranks",
                            op->count, ranks);
  uint64_t bytes = 0, many = 0;
  if (hali_mul_overflows_u64(op->count,
                             hali_hal_element_type_byte_size(op->element_type),
                             &bytes) ||
      hali_mul_overflows_u64(bytes, ranks, &many))
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "%s: %" PRIu64 " x %s over %" PRIu64
                            " ranks overflows a byte length",
                            kind, op->count, et, ranks);
  bool root = op->param == channel->rank;
  switch (op->kind) {
    case HALI_HAL_COLLECTIVE_ALL_GATHER:
      *out_send_length = bytes, *out_recv_length = many;
      break;
    case HALI_HAL_COLLECTIVE_REDUCE_SCATTER:
      *out_send_length = many, *out_recv_length = bytes;
      break;
    case HALI_HAL_COLLECTIVE_BROADCAST:
      *out_send_length = root ? bytes : 0, *out_recv_length = bytes;
      break;
    case HALI_HAL_COLLECTIVE_REDUCE:
      *out_send_length = bytes, *out_recv_length = root ? bytes : 0;
      break;
    case HALI_HAL_COLLECTIVE_SEND:
      *out_send_length = bytes;
      break;
    case HALI_HAL_COLLECTIVE_RECV:
      *out_recv_length = bytes;
      break;
    default: /* all_reduce, all_to_all */
      *out_send_length = bytes, *out_recv_length = bytes;
      break;
  }
  return HALI_OK;
}

/* ---- running one. ---- */

/* Elements of a 16-bit float type widened to f32 (and back), so that
 * f16/bf16 reductions are computed in f32. */
static bool is_half(hali_hal_element_type_t t) {
  return t == HALI_HAL_ELEMENT_TYPE_FLOAT_16 ||
         t == HALI_HAL_ELEMENT_TYPE_BFLOAT_16;
}

static void widen(hali_hal_element_type_t t, const uint16_t *in, float *out,
                  uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    out[i] = t == HALI_HAL_ELEMENT_TYPE_FLOAT_16 ? hali_f16_to_f32(in[i])
                                                 : hali_bf16_to_f32(in[i]);
}
static void narrow(hali_hal_element_type_t t, const float *in, uint16_t *out,
                   uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    out[i] = t == HALI_HAL_ELEMENT_TYPE_FLOAT_16 ? hali_f32_to_f16(in[i])
                                                 : hali_f32_to_bf16(in[i]);
}

/* Divides |n| elements of type |t| at |p| by |ranks| (average). */
static void divide(hali_hal_element_type_t t, void *p, uint64_t n,
                   int32_t ranks) {
  switch (t) {
#define DIV(ID, T)                                                             \
  case HALI_HAL_ELEMENT_TYPE_##ID:                                             \
    for (uint64_t i = 0; i < n; ++i) ((T *)p)[i] /= (T)ranks;                  \
    break;
    DIV(INT_8, int8_t)
    DIV(INT_16, int16_t)
    DIV(INT_32, int32_t)
    DIV(INT_64, int64_t)
    DIV(SINT_8, int8_t)
    DIV(SINT_16, int16_t)
    DIV(SINT_32, int32_t)
    DIV(SINT_64, int64_t)
    DIV(UINT_8, uint8_t)
    DIV(UINT_16, uint16_t)
    DIV(UINT_32, uint32_t)
    DIV(UINT_64, uint64_t)
    DIV(FLOAT_32, float)
    DIV(FLOAT_64, double)
#undef DIV
    default:
      break;
  }
}

#ifdef HALI_HAVE_MPI
static MPI_Datatype mpi_type(hali_hal_element_type_t t) {
  switch (t) {
    case HALI_HAL_ELEMENT_TYPE_INT_8:
    case HALI_HAL_ELEMENT_TYPE_SINT_8:
      return MPI_INT8_T;
    case HALI_HAL_ELEMENT_TYPE_INT_16:
    case HALI_HAL_ELEMENT_TYPE_SINT_16:
      return MPI_INT16_T;
    case HALI_HAL_ELEMENT_TYPE_INT_32:
    case HALI_HAL_ELEMENT_TYPE_SINT_32:
      return MPI_INT32_T;
    case HALI_HAL_ELEMENT_TYPE_INT_64:
    case HALI_HAL_ELEMENT_TYPE_SINT_64:
      return MPI_INT64_T;
    case HALI_HAL_ELEMENT_TYPE_UINT_8:
    case HALI_HAL_ELEMENT_TYPE_BOOL_8:
    case HALI_HAL_ELEMENT_TYPE_INT_1:
      return MPI_UINT8_T;
    case HALI_HAL_ELEMENT_TYPE_UINT_16:
    case HALI_HAL_ELEMENT_TYPE_FLOAT_16: /* moved, not reduced: the bits */
    case HALI_HAL_ELEMENT_TYPE_BFLOAT_16:
      return MPI_UINT16_T;
    case HALI_HAL_ELEMENT_TYPE_UINT_32:
      return MPI_UINT32_T;
    case HALI_HAL_ELEMENT_TYPE_UINT_64:
      return MPI_UINT64_T;
    case HALI_HAL_ELEMENT_TYPE_FLOAT_64:
      return MPI_DOUBLE;
    default: /* f32 (and f16/bf16 reductions, widened to it) */
      return MPI_FLOAT;
  }
}

static MPI_Op mpi_op(const hali_hal_collective_t *op) {
  bool b = is_boolean(op->element_type);
  switch (op->reduction) {
    case HALI_HAL_COLLECTIVE_REDUCTION_PRODUCT:
      return b ? MPI_BAND : MPI_PROD;
    case HALI_HAL_COLLECTIVE_REDUCTION_MIN:
      return MPI_MIN;
    case HALI_HAL_COLLECTIVE_REDUCTION_MAX:
      return MPI_MAX;
    default: /* sum, average */
      return b ? MPI_BOR : MPI_SUM;
  }
}

/* The header every rank of a collective sends before its data. */
enum { HEADER_MAGIC = 0x48434f4cu /* "HCOL" */, TAG_HEADER = 1, TAG_DATA = 2 };
typedef struct {
  uint32_t magic;
  uint32_t failed;
  uint64_t seq;
  uint32_t kind, reduction, element_type;
  int32_t param;
  uint64_t count;
  char reason[216];
} header_t;
_Static_assert(sizeof(header_t) == 256, "one header is 256 bytes");

/* Waits for |req| (mpi_mu not held), polling the stop and the channel's
 * timeout.  On a timeout or a stop the request stays pending forever, so the
 * channel is broken. */
static hali_status_t wait_request(hali_hal_channel_t *ch, MPI_Request *req,
                                  hali_hal_stop_t *stop, const char *what,
                                  uint64_t seq) {
  int64_t start = hali_clock_now_ns();
  for (;;) {
    int done = 0;
    pthread_mutex_lock(&mpi_mu);
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&mpi_mu);
    if (rc != MPI_SUCCESS) return mpi_error(rc, what);
    if (done) return HALI_OK;
    hali_status_t why = HALI_OK;
    hali_status_code_t stopped = hali_hal_stop_check(stop);
    int64_t waited = hali_clock_now_ns() - start;
    if (stopped)
      why = hali_status_annotate(hali_hal_stop_status(stopped),
                                 "while waiting for %s (collective #%" PRIu64
                                 ")",
                                 what, seq);
    else if (ch->timeout_ns > 0 && waited > ch->timeout_ns)
      why = hali_status_make(
          HALI_STATUS_DEADLINE_EXCEEDED,
          "%s (collective #%" PRIu64 " on a channel of %d ranks, this is "
          "rank %d): not every rank arrived within %.3g s "
          "(--collective_timeout); a rank may have exited or be stuck",
          what, seq, ch->count, ch->rank, (double)ch->timeout_ns / 1e9);
    if (why) {
      pthread_mutex_lock(&ch->mu);
      if (!ch->broken) ch->broken = hali_status_clone(why);
      pthread_mutex_unlock(&ch->mu);
      pthread_mutex_lock(&mpi_mu);
      mpi_stuck = true;
      pthread_mutex_unlock(&mpi_mu);
      return why;
    }
    /* MPI's non-blocking collectives progress only inside MPI calls, so
     * poll hard first (the common case: the peers are there), then yield,
     * then sleep between polls of a long wait. */
    if (waited < 10 * 1000000LL) {
      continue;
    } else if (waited < 200 * 1000000LL) {
      sched_yield();
    } else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
}

static void fill_header(header_t *h, uint64_t seq,
                        const hali_hal_collective_t *op, hali_status_t failed) {
  memset(h, 0, sizeof(*h));
  h->magic = HEADER_MAGIC;
  h->seq = seq;
  h->kind = op->kind;
  h->reduction = op->reduction;
  h->element_type = op->element_type;
  h->param = op->param;
  h->count = op->count;
  if (failed) {
    h->failed = 1;
    snprintf(h->reason, sizeof(h->reason), "%s",
             hali_status_message(failed));
  }
}

static void header_op(const header_t *h, hali_hal_collective_t *op) {
  op->kind = h->kind;
  op->reduction = h->reduction;
  op->element_type = h->element_type;
  op->param = h->param;
  op->count = h->count;
}

/* Whether |a| (this rank) and |b| (rank |peer|) describe one collective. */
static bool headers_agree(const header_t *a, const header_t *b, bool p2p) {
  if (p2p)
    return b->count == a->count && b->element_type == a->element_type &&
           ((a->kind == HALI_HAL_COLLECTIVE_SEND &&
             b->kind == HALI_HAL_COLLECTIVE_RECV) ||
            (a->kind == HALI_HAL_COLLECTIVE_RECV &&
             b->kind == HALI_HAL_COLLECTIVE_SEND));
  return a->seq == b->seq && a->kind == b->kind &&
         a->reduction == b->reduction && a->element_type == b->element_type &&
         a->param == b->param && a->count == b->count;
}

/* Exchanges headers with the ranks of |op|; on a failure or a disagreement
 * returns the error every rank reports. */
static hali_status_t exchange_headers(hali_hal_channel_t *ch, uint64_t seq,
                                      const hali_hal_collective_t *op,
                                      hali_status_t failed,
                                      hali_hal_stop_t *stop) {
  bool p2p = op->kind == HALI_HAL_COLLECTIVE_SEND ||
             op->kind == HALI_HAL_COLLECTIVE_RECV;
  int n = p2p ? 1 : ch->count;
  header_t mine;
  fill_header(&mine, seq, op, failed);
  header_t *all = hali_calloc((size_t)n, sizeof(header_t));
  if (!all) return hali_status_oom();
  char what[160];
  describe(op, what, sizeof(what));
  char waiting[200];
  snprintf(waiting, sizeof(waiting), "the header exchange of %s", what);
  hali_status_t s = HALI_OK;
  MPI_Request reqs[2];
  pthread_mutex_lock(&mpi_mu);
  int rc;
  if (p2p) {
    rc = MPI_Isend(&mine, sizeof(mine), MPI_BYTE, op->param, TAG_HEADER,
                   ch->comm, &reqs[0]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Irecv(all, sizeof(header_t), MPI_BYTE, op->param, TAG_HEADER,
                     ch->comm, &reqs[1]);
  } else {
    rc = MPI_Iallgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(header_t),
                        MPI_BYTE, ch->comm, &reqs[0]);
  }
  pthread_mutex_unlock(&mpi_mu);
  if (rc != MPI_SUCCESS) s = mpi_error(rc, waiting);
  for (int i = 0; !s && i < (p2p ? 2 : 1); ++i)
    s = wait_request(ch, &reqs[i], stop, waiting, seq);
  for (int r = 0; !s && r < n; ++r) {
    const header_t *h = &all[r];
    int rank = p2p ? op->param : r;
    if (h->magic != HEADER_MAGIC) {
      s = hali_status_make(HALI_STATUS_DATA_LOSS,
                           "%s (collective #%" PRIu64 "): rank %d sent a "
                           "header that is not hali's",
                           what, seq, rank);
    } else if (h->failed && rank != ch->rank) {
      char theirs[160];
      hali_hal_collective_t o;
      header_op(h, &o);
      describe(&o, theirs, sizeof(theirs));
      s = hali_status_make(HALI_STATUS_ABORTED,
                           "%s (collective #%" PRIu64 ", rank %d of %d): "
                           "rank %d failed before %s: %.*s",
                           what, seq, ch->rank, ch->count, rank, theirs,
                           (int)sizeof(h->reason), h->reason);
    } else if (!headers_agree(&mine, h, p2p)) {
      char theirs[160];
      hali_hal_collective_t o;
      header_op(h, &o);
      describe(&o, theirs, sizeof(theirs));
      s = hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                           "mismatched collectives: rank %d does %s as "
                           "collective #%" PRIu64 " but rank %d does %s as "
                           "collective #%" PRIu64,
                           ch->rank, what, seq, rank, theirs, h->seq);
    }
  }
  hali_free(all);
  return s;
}

/* The data phase, once the header exchange has shown every rank of |op|
 * present and agreeing: MPI's blocking call (its tuned algorithms are
 * faster than the non-blocking ones, and it cannot wait for a missing
 * rank any more).  Without MPI_THREAD_MULTIPLE it holds mpi_mu. */
static hali_status_t run_mpi(hali_hal_channel_t *ch,
                             const hali_hal_collective_t *op, const void *send,
                             void *recv, uint64_t recv_length) {
  int n = (int)op->count;
  MPI_Datatype t = mpi_type(op->element_type);
  MPI_Op mop = mpi_op(op);
  int rc = MPI_SUCCESS;
  if (!mpi_multiple) pthread_mutex_lock(&mpi_mu);
  switch (op->kind) {
    case HALI_HAL_COLLECTIVE_ALL_GATHER:
      rc = MPI_Allgather(send, n, t, recv, n, t, ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_ALL_REDUCE:
      rc = MPI_Allreduce(send, recv, n, t, mop, ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_ALL_TO_ALL:
      rc = MPI_Alltoall(send, n / ch->count, t, recv, n / ch->count, t,
                        ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_BROADCAST:
      if (ch->rank == op->param && recv_length) memcpy(recv, send, recv_length);
      rc = MPI_Bcast(recv, n, t, op->param, ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_REDUCE:
      rc = MPI_Reduce(send, recv, n, t, mop, op->param, ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_REDUCE_SCATTER:
      rc = MPI_Reduce_scatter_block(send, recv, n, t, mop, ch->comm);
      break;
    case HALI_HAL_COLLECTIVE_SEND:
      rc = MPI_Send(send, n, t, op->param, TAG_DATA, ch->comm);
      break;
    default: /* recv */
      rc = MPI_Recv(recv, n, t, op->param, TAG_DATA, ch->comm,
                    MPI_STATUS_IGNORE);
      break;
  }
  if (!mpi_multiple) pthread_mutex_unlock(&mpi_mu);
  if (rc == MPI_SUCCESS) return HALI_OK;
  char what[160];
  describe(op, what, sizeof(what));
  return mpi_error(rc, what);
}
#endif /* HALI_HAVE_MPI */

/* Takes the channel's next sequence number, or its broken status. */
static hali_status_t next_seq(hali_hal_channel_t *ch, uint64_t *out_seq) {
  pthread_mutex_lock(&ch->mu);
  hali_status_t s = ch->broken ? hali_status_clone(ch->broken) : HALI_OK;
  *out_seq = ++ch->seq;
  pthread_mutex_unlock(&ch->mu);
  if (s)
    return hali_status_annotate(s, "the channel is broken by an earlier "
                                   "collective that never completed");
  return HALI_OK;
}

hali_status_t hali_hal_channel_run(hali_hal_channel_t *channel,
                                   const hali_hal_collective_t *op,
                                   const void *send, void *recv,
                                   hali_hal_stop_t *stop) {
  uint64_t send_length = 0, recv_length = 0;
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_collective_lengths(channel, op, &send_length, &recv_length));
  uint64_t seq = 0;
  HALI_RETURN_IF_ERROR_PLAIN(next_seq(channel, &seq));
#ifdef HALI_HAVE_MPI
  if (channel->mpi) {
    HALI_RETURN_IF_ERROR_PLAIN(
        exchange_headers(channel, seq, op, HALI_OK, stop));
    if (!is_half(op->element_type) || !is_reducing(op->kind)) {
      hali_status_t s =
          run_mpi(channel, op, send, recv, recv_length);
      if (!s && op->reduction == HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE)
        divide(op->element_type, recv,
               recv_length / hali_hal_element_type_byte_size(op->element_type),
               channel->count);
      return s;
    }
    /* f16/bf16 reductions: widen both sides to f32, reduce, narrow. */
    uint64_t sn = send_length / 2, rn = recv_length / 2;
    float *ws = hali_malloc(sn ? sn * sizeof(float) : 1);
    float *wr = hali_malloc(rn ? rn * sizeof(float) : 1);
    hali_status_t s = HALI_OK;
    if (!ws || !wr) {
      s = hali_status_oom();
    } else {
      widen(op->element_type, send, ws, sn);
      hali_hal_collective_t wide = *op;
      wide.element_type = HALI_HAL_ELEMENT_TYPE_FLOAT_32;
      s = run_mpi(channel, &wide, ws, wr, rn * sizeof(float));
      if (!s && wide.reduction == HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE)
        divide(wide.element_type, wr, rn, channel->count);
      if (!s) narrow(op->element_type, wr, recv, rn);
    }
    hali_free(ws);
    hali_free(wr);
    return s;
  }
#else
  (void)stop;
#endif
  /* One rank: every collective gives back what this rank sent (a reduction
   * of one value is that value; the average divides by one). */
  if (recv_length && send_length) memcpy(recv, send, (size_t)recv_length);
  return HALI_OK;
}

void hali_hal_channel_abort(hali_hal_channel_t *channel,
                            const hali_hal_collective_t *op,
                            hali_status_t reason) {
#ifdef HALI_HAVE_MPI
  if (!channel->mpi) return;
  uint64_t seq = 0;
  hali_status_t s = next_seq(channel, &seq);
  if (!s) s = exchange_headers(channel, seq, op, reason, NULL);
  hali_status_free(s);
#else
  (void)channel;
  (void)op;
  (void)reason;
#endif
}
