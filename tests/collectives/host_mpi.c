/* A host that runs its own MPI (doc/collectives.md, "A host with its own
 * MPI"): it initializes MPI, splits the world into even and odd ranks and
 * gives hali the half it is in through hali_device_params_t.mpi_comm.  The
 * all-reduce of examples/collectives/allreduce.hasm then sums over that
 * half only.  Run by tests/collectives.test under mpirun; prints "ok" or
 * what was wrong and exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "hali/hali.h"

static int failed(hali_status_t s) {
  if (!s) return 0;
  char *text = hali_status_to_string(s);
  fprintf(stderr, "host_mpi: %s\n", text);
  hali_free(text);
  hali_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int rc = 1;
  hali_instance_t *instance = NULL;
  hali_device_t *device = NULL;
  hali_module_t *module = NULL;
  hali_context_t *context = NULL;
  hali_function_t *fn = NULL;
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.mpi_comm = &half;
  dp.collective_timeout_ns = 20 * 1000000000LL;
  int32_t wr = -1, wn = -1;
  if (failed(hali_instance_create(NULL, &instance)) ||
      failed(hali_world_rank(&wr, &wn)) ||
      failed(hali_device_create(instance, &dp, &device)) ||
      failed(hali_module_load_file(instance, argv[1], &module)) ||
      failed(hali_context_create(instance, device, &module, 1, NULL,
                                 &context)) ||
      failed(hali_context_lookup_function(context, "main", &fn)))
    goto done;
  /* The host may free its communicator: hali holds a duplicate. */
  MPI_Comm_free(&half);
  hali_variant_t arg = hali_variant_i64(3), result;
  if (failed(hali_context_invoke(context, fn, &arg, 1, &result, 1))) goto done;
  int32_t got[3] = {0};
  if (!failed(hali_buffer_view_read(result.u.view, got, sizeof(got)))) {
    /* Each rank of the half sends its rank in the half: 0 + 1 + ... */
    int members = (size - rank % 2 + 1) / 2;
    int want = members * (members - 1) / 2;
    if (wr != rank || wn != size)
      fprintf(stderr, "host_mpi: hali_world_rank gave %d of %d, want %d of %d\n",
              wr, wn, rank, size);
    else if (got[0] != want || got[1] != want || got[2] != want)
      fprintf(stderr, "host_mpi: rank %d got %d %d %d, want %d\n", rank,
              got[0], got[1], got[2], want);
    else
      rc = 0;
  }
  hali_variant_release(&result);
done:
  hali_context_release(context);
  hali_module_release(module);
  hali_device_release(device);
  hali_instance_release(instance);
  MPI_Finalize();
  if (rc == 0 && rank == 0) printf("ok\n");
  return rc;
}
