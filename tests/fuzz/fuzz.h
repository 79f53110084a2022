/* hali fuzz targets (tests/fuzz/README.md): each file defines
 * LLVMFuzzerTestOneInput, built two ways — with clang's libFuzzer by
 * `./configure --enable-fuzzing && make fuzz`, and in every build with
 * tests/fuzz/replay.c, which feeds it each file of its corpus (make check
 * replays every corpus entry, seeds and reproducers alike). */
#ifndef HALI_TESTS_FUZZ_H
#define HALI_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Loads |data| as a module through the public API and runs every function
 * whose arguments are all scalars (zeros) under small limits: fuel, call
 * depth, memory.  Any failure must be a clean status. */
void hali_fuzz_load_and_run(const uint8_t *data, size_t size);

#endif
