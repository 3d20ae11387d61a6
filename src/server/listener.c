/* The listening socket and its accepting thread (listener.h). */
#define _GNU_SOURCE
#include "server/listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/log.h"

struct pr_listener {
  int fd;   /* the listening socket */
  int stop; /* eventfd: written to end the thread */
  pthread_t thread;
  bool running;
  void (*add)(void *ctx, int fd, const struct sockaddr *a, socklen_t len);
  bool (*full)(void *ctx);
  void *ctx;
};

pr_status_t pr__listener_open(const struct sockaddr_storage *addr, pr_listener_t **out, int *port,
                              char *err, size_t err_len) {
  *out = NULL;
  pr_listener_t *l = calloc(1, sizeof *l);
  if (!l) return pr__errf(err, err_len, "out of memory"), PR_ERR_NOMEM;
  bool v6 = addr->ss_family == AF_INET6;
  socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int one = 1;
  l->stop = eventfd(0, EFD_CLOEXEC);
  l->fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->fd < 0 || l->stop < 0 || setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
      (v6 && setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one)) ||
      bind(l->fd, (const struct sockaddr *)addr, len) || listen(l->fd, SOMAXCONN)) {
    pr__errf(err, err_len, "%s", strerror(errno));
    if (l->fd >= 0) close(l->fd);
    if (l->stop >= 0) close(l->stop);
    free(l);
    return PR_ERR_IO;
  }
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  *port = getsockname(l->fd, (struct sockaddr *)&bound, &blen)
              ? 0
              : ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                         : ((struct sockaddr_in *)&bound)->sin_port);
  *out = l;
  return PR_OK;
}

/* Accepts what the backlog holds now (at most a round's worth: the stop
 * and the limit are looked at between rounds). */
static void accept_round(pr_listener_t *l) {
  for (int i = 0; i < 64 && !l->full(l->ctx); i++) {
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    int c = accept4(l->fd, (struct sockaddr *)&a, &len, SOCK_CLOEXEC);
    if (c >= 0) {
      l->add(l->ctx, c, (struct sockaddr *)&a, len);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      /* out of descriptors or memory: the connection waits in the backlog
       * until a close frees one; a short pause, not a spin */
      static _Atomic int warned;
      if (!atomic_exchange(&warned, 1))
        pr__log(PR_LOG_WARN, "accept: %s; connections wait in the backlog", strerror(errno));
      usleep(10000);
    }
    return; /* EAGAIN: the backlog is empty */
  }
}

static void *accept_main(void *arg) {
  pr_listener_t *l = arg;
  for (;;) {
    bool full = l->full(l->ctx);
    /* at the limit only the stop is watched, and the limit looked at again
     * every 10 ms: the connections wait in the kernel's backlog */
    struct pollfd p[2] = {{l->stop, POLLIN, 0}, {l->fd, POLLIN, 0}};
    int n = poll(p, full ? 1 : 2, full ? 10 : -1);
    if (n < 0 && errno != EINTR) usleep(1000);
    if (p[0].revents) return NULL;
    if (!full && p[1].revents) accept_round(l);
  }
}

pr_status_t pr__listener_start(pr_listener_t *l,
                               void (*add)(void *ctx, int fd, const struct sockaddr *a,
                                           socklen_t len),
                               bool (*full)(void *ctx), void *ctx) {
  l->add = add, l->full = full, l->ctx = ctx;
  l->running = pthread_create(&l->thread, NULL, accept_main, l) == 0;
  return l->running ? PR_OK : PR_ERR_NOMEM;
}

int pr__listener_stop(pr_listener_t *l) {
  if (!l) return -1;
  if (l->running) {
    uint64_t one = 1;
    while (write(l->stop, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_join(l->thread, NULL);
  }
  close(l->stop);
  int fd = l->fd;
  free(l);
  return fd;
}
