/* The ping-pong pair shared by tests/check_fiber.c (which checks it) and
 * bench/fiber.c (which times it): two fibers hand a baton back and forth
 * through two timeline fences (fence@i = the same semaphore at value
 * 1 + i), each for |n| rounds. */
#ifndef HALI_TESTS_PING_PONG_H_
#define HALI_TESTS_PING_PONG_H_

#define HALI_PING_PONG_HASM \
    "func @ping(%mine: !hal.fence, %theirs: !hal.fence, %n: i64) {\n" \
    "^entry:\n" \
    "  %i = const.i64 0\n" \
    "  %one = const.i64 1\n" \
    "  %forever = const.i64 -1\n" \
    "  br ^loop\n" \
    "^loop:\n" \
    "  %m = hal.fence.offset %mine, %i\n" \
    "  hal.fence.signal %m\n" \
    "  %t = hal.fence.offset %theirs, %i\n" \
    "  %s = hal.fence.await %t, %forever\n" \
    "  %i = add.i64 %i, %one\n" \
    "  %more = lt.s.i64 %i, %n\n" \
    "  cond_br %more, ^loop, ^done\n" \
    "^done:\n" \
    "  return\n" \
    "}\n" \
    "func @pong(%mine: !hal.fence, %theirs: !hal.fence, %n: i64) {\n" \
    "^entry:\n" \
    "  %i = const.i64 0\n" \
    "  %one = const.i64 1\n" \
    "  %forever = const.i64 -1\n" \
    "  br ^loop\n" \
    "^loop:\n" \
    "  %t = hal.fence.offset %theirs, %i\n" \
    "  %s = hal.fence.await %t, %forever\n" \
    "  %m = hal.fence.offset %mine, %i\n" \
    "  hal.fence.signal %m\n" \
    "  %i = add.i64 %i, %one\n" \
    "  %more = lt.s.i64 %i, %n\n" \
    "  cond_br %more, ^loop, ^done\n" \
    "^done:\n" \
    "  return\n" \
    "}\n"

#endif /* HALI_TESTS_PING_PONG_H_ */
