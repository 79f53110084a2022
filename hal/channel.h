/* hali HAL — channels and collectives: a group of ranks (processes) that
 * exchange buffers (doc/collectives.md).
 *
 * A channel is a set of |count| ranks of which this process is |rank|.  The
 * default channel is the MPI world when the process was started by an MPI
 * launcher (mpirun) or when the host initialized MPI itself, and a channel of
 * one rank otherwise, so a program that uses collectives also runs alone.
 * Channels split like communicators (color, key).  Built without MPI
 * (configure --without-mpi) every channel has one rank.
 *
 * Collectives are recorded into command buffers
 * (hali_hal_command_buffer_collective) and run on the queue in order with
 * the other commands.  Each one first exchanges a small header with the
 * ranks it involves: its sequence number, kind, reduction, element type and
 * count.  A rank whose work failed before the collective still sends the
 * header, marked failed with the reason, so every peer fails at once with a
 * message naming that rank; headers that disagree (rank 0 all-reduces, rank
 * 1 all-gathers) fail every rank with both described; a rank that does not
 * arrive within the channel's timeout fails the collective with
 * DEADLINE_EXCEEDED.  A channel whose collective timed out is broken: every
 * later collective on it fails at once.
 *
 * Thread-safety: a channel may be used from any thread; collectives on one
 * channel must be ordered (by fences or by recording them into one command
 * buffer), as on every rank they must be issued in the same order.
 */
#ifndef HALI_HAL_CHANNEL_H
#define HALI_HAL_CHANNEL_H

#include "hal/common.h"
#include "hal/stop.h"

/* The kinds of collective, numbered as the VM passes them (doc/isa.md). */
typedef enum hali_hal_collective_kind_e {
  HALI_HAL_COLLECTIVE_ALL_GATHER = 0,
  HALI_HAL_COLLECTIVE_ALL_REDUCE = 1,
  HALI_HAL_COLLECTIVE_ALL_TO_ALL = 2,
  HALI_HAL_COLLECTIVE_BROADCAST = 3,
  HALI_HAL_COLLECTIVE_REDUCE = 4,
  HALI_HAL_COLLECTIVE_REDUCE_SCATTER = 5,
  HALI_HAL_COLLECTIVE_SEND = 6,
  HALI_HAL_COLLECTIVE_RECV = 7,
  HALI_HAL_COLLECTIVE_KIND_COUNT_ = 8,
} hali_hal_collective_kind_t;

typedef enum hali_hal_collective_reduction_e {
  HALI_HAL_COLLECTIVE_REDUCTION_NONE = 0,
  HALI_HAL_COLLECTIVE_REDUCTION_SUM = 1,
  HALI_HAL_COLLECTIVE_REDUCTION_PRODUCT = 2,
  HALI_HAL_COLLECTIVE_REDUCTION_MIN = 3,
  HALI_HAL_COLLECTIVE_REDUCTION_MAX = 4,
  HALI_HAL_COLLECTIVE_REDUCTION_AVERAGE = 5,
  HALI_HAL_COLLECTIVE_REDUCTION_COUNT_ = 6,
} hali_hal_collective_reduction_t;

/* One collective: what it does and over how many elements.  |count| is the
 * number of elements each rank contributes (all_gather, all_reduce, reduce,
 * broadcast, send, recv), receives (reduce_scatter) or exchanges in total
 * (all_to_all: |count| elements sent, divisible by the rank count).
 * |param| is the root rank (broadcast, reduce) or the peer (send, recv). */
typedef struct hali_hal_collective_t {
  hali_hal_collective_kind_t kind;
  hali_hal_collective_reduction_t reduction;
  hali_hal_element_type_t element_type;
  int32_t param;
  uint64_t count;
} hali_hal_collective_t;

/* "all_reduce", "sum", ...; "?" when out of range. */
const char *hali_hal_collective_kind_name(uint32_t kind);
const char *hali_hal_collective_reduction_name(uint32_t reduction);

/* The process's default channel (see above), with |timeout_ns| for each
 * collective's arrival (<= 0: wait forever).  Each call returns a new
 * channel over the same ranks (sequence numbers of its own).  Initializes
 * MPI on first use when an MPI launcher started the process. */
HALI_MUST_USE hali_status_t hali_hal_channel_create_default(
    hali_timeout_ns_t timeout_ns, hali_hal_channel_t **out_channel);
/* A channel of one rank (rank 0 of 1), whatever the process's launcher. */
HALI_MUST_USE hali_status_t hali_hal_channel_create_local(
    hali_timeout_ns_t timeout_ns, hali_hal_channel_t **out_channel);
/* Ranks with the same |color| form a new channel, ordered by |key| (then by
 * their rank in |channel|); a negative color gives a channel of this rank
 * alone.  Collective over |channel|: every rank must call it. */
HALI_MUST_USE hali_status_t hali_hal_channel_split(
    hali_hal_channel_t *channel, int32_t color, int32_t key,
    hali_hal_channel_t **out_channel);
/* A channel over an MPI communicator the host owns (duplicated: the host may
 * free its own).  |mpi_comm| points at an MPI_Comm.  UNAVAILABLE when hali
 * was built without MPI or MPI is not initialized. */
HALI_MUST_USE hali_status_t hali_hal_channel_create_from_mpi(
    const void *mpi_comm, hali_timeout_ns_t timeout_ns,
    hali_hal_channel_t **out_channel);

/* This process's rank in the MPI world and the world's size, without making
 * a channel (0 and 1 when no MPI launcher started the process or hali was
 * built without MPI).  Initializes MPI as hali_hal_channel_create_default
 * does. */
HALI_MUST_USE hali_status_t hali_hal_channel_world(int32_t *out_rank,
                                                   int32_t *out_count);

void hali_hal_channel_retain(hali_hal_channel_t *channel);
void hali_hal_channel_release(hali_hal_channel_t *channel);

int32_t hali_hal_channel_rank(const hali_hal_channel_t *channel);
int32_t hali_hal_channel_count(const hali_hal_channel_t *channel);
/* True when the channel runs over MPI (even with one rank). */
bool hali_hal_channel_is_mpi(const hali_hal_channel_t *channel);

/* Checks |op| against the channel (kind, reduction, element type, root or
 * peer, count) and gives the byte lengths its send and receive ranges must
 * have on this rank (0: the range is not used).  INVALID_ARGUMENT or
 * OUT_OF_RANGE naming what is wrong. */
HALI_MUST_USE hali_status_t hali_hal_collective_lengths(
    const hali_hal_channel_t *channel, const hali_hal_collective_t *op,
    uint64_t *out_send_length, uint64_t *out_recv_length);

/* Runs |op| now, blocking the calling thread (the queue) until it completes,
 * fails, times out or |stop| is requested.  |send| and |recv| point at the
 * lengths hali_hal_collective_lengths gave (either may be NULL when its
 * length is 0). */
HALI_MUST_USE hali_status_t hali_hal_channel_run(
    hali_hal_channel_t *channel, const hali_hal_collective_t *op,
    const void *send, void *recv, hali_hal_stop_t *stop);
/* Tells the ranks of |op| that this rank will not perform it, because of
 * |reason| (borrowed): they fail it with a message naming this rank.  Used
 * by the queue when a submission holding collectives fails before them. */
void hali_hal_channel_abort(hali_hal_channel_t *channel,
                            const hali_hal_collective_t *op,
                            hali_status_t reason);

#endif /* HALI_HAL_CHANNEL_H */
