/* hali — SIGINT/SIGTERM during a run: the first signal cancels the
 * context's invocations, so that the run fails with CANCELLED, the
 * context is released and a Chrome trace is completed and closed; a
 * second signal ends the process at once (the default action).
 *
 * The handler only writes the signal number to a pipe (async-signal-safe);
 * a watcher thread reads it and calls hali_context_cancel. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "tools/tools.h"

static int pipe_fds[2] = {-1, -1};
static pthread_t watcher;
static bool watching;
static atomic_int received;
static struct sigaction old_int, old_term;

static void on_signal(int sig) {
  if (atomic_exchange(&received, sig) != 0) {
    /* The second one: give up at once. */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  unsigned char c = (unsigned char)sig;
  int saved = errno;
  if (write(pipe_fds[1], &c, 1) < 0) { /* nothing else is safe here */
  }
  errno = saved;
}

static void *watch(void *arg) {
  hali_context_t *context = arg;
  unsigned char c;
  ssize_t n;
  while ((n = read(pipe_fds[0], &c, 1)) < 0 && errno == EINTR) {
  }
  if (n == 1) hali_context_cancel(context);
  return NULL;
}

void tool_signals_watch(hali_context_t *context) {
  if (watching || pipe(pipe_fds) != 0) return;
  if (pthread_create(&watcher, NULL, watch, context) != 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    pipe_fds[0] = pipe_fds[1] = -1;
    return;
  }
  watching = true;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
}

int tool_signals_release(void) {
  if (watching) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(pipe_fds[1]); /* the watcher reads end-of-file and returns */
    pthread_join(watcher, NULL);
    close(pipe_fds[0]);
    pipe_fds[0] = pipe_fds[1] = -1;
    watching = false;
  }
  return atomic_load(&received);
}
