/* The watcher of hangup.h: one epoll set, one thread, and a table of
 * watches. A watch is a slot index and the slot's generation (both in the
 * epoll event's data), so an event the thread harvested for a watch that
 * was removed meanwhile (its slot free, or reused) is told apart and
 * dropped. */
#define _GNU_SOURCE
#include "server/hangup.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/log.h"

typedef struct {
  void *item; /* NULL: free */
  int fd;
  uint32_t gen;
  int next_free;
} slot_t;

struct pr_hangup {
  bool (*take)(void *item);
  void (*finish)(void *item);
  int ep, stop_fd;
  pthread_t thread;
  pthread_mutex_t lock;
  slot_t *slots;
  int n_slots, free_head; /* free list through next_free, -1: empty */
};

static uint64_t token(uint32_t idx, uint32_t gen) {
  return (uint64_t)gen << 32 | idx;
}

/* The item of a live watch (lock held), NULL when it is gone. */
static slot_t *slot_of(pr_hangup_t *h, uint64_t w) {
  uint32_t idx = (uint32_t)w, gen = (uint32_t)(w >> 32);
  if (idx >= (uint32_t)h->n_slots) return NULL;
  slot_t *sl = &h->slots[idx];
  return sl->item && sl->gen == gen ? sl : NULL;
}

/* Frees a slot (lock held): its generation moves on. */
static void release(pr_hangup_t *h, slot_t *sl) {
  sl->item = NULL;
  if (!++sl->gen) sl->gen = 1; /* a watch is never 0 */
  sl->next_free = h->free_head;
  h->free_head = (int)(sl - h->slots);
}

static void *watch_main(void *arg) {
  pr_hangup_t *h = arg;
  struct epoll_event ev[64];
  for (;;) {
    int n = epoll_wait(h->ep, ev, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return NULL;
    for (int i = 0; i < n; i++) {
      if (ev[i].data.u64 == UINT64_MAX) return NULL; /* stop */
      pthread_mutex_lock(&h->lock);
      slot_t *sl = slot_of(h, ev[i].data.u64);
      void *item = sl ? sl->item : NULL;
      bool taken = item && h->take(item);
      pthread_mutex_unlock(&h->lock);
      /* one-shot: the watch stays (disarmed) until its owner removes it */
      if (taken) h->finish(item);
    }
  }
}

pr_status_t pr__hangup_start(bool (*take)(void *item), void (*finish)(void *item),
                             pr_hangup_t **out, char *err, size_t err_len) {
  *out = NULL;
  pr_hangup_t *h = calloc(1, sizeof *h);
  if (!h) return PR_ERR_NOMEM;
  h->take = take;
  h->finish = finish;
  h->free_head = -1;
  h->ep = epoll_create1(EPOLL_CLOEXEC);
  h->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pthread_mutex_init(&h->lock, NULL);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
  if (h->ep < 0 || h->stop_fd < 0 || epoll_ctl(h->ep, EPOLL_CTL_ADD, h->stop_fd, &ev) ||
      pthread_create(&h->thread, NULL, watch_main, h)) {
    pr__errf(err, err_len, "cannot start the watcher of idle connections");
    if (h->ep >= 0) close(h->ep);
    if (h->stop_fd >= 0) close(h->stop_fd);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return PR_ERR_IO;
  }
  *out = h;
  return PR_OK;
}

uint64_t pr__hangup_add(pr_hangup_t *h, int fd, void *item) {
  pthread_mutex_lock(&h->lock);
  if (h->free_head < 0) {
    int n = h->n_slots ? 2 * h->n_slots : 64;
    slot_t *more = realloc(h->slots, sizeof *more * (size_t)n);
    if (!more) {
      pthread_mutex_unlock(&h->lock);
      return 0;
    }
    h->slots = more;
    for (int k = n - 1; k >= h->n_slots; k--) {
      more[k] = (slot_t){.gen = 1, .next_free = h->free_head};
      h->free_head = k;
    }
    h->n_slots = n;
  }
  slot_t *sl = &h->slots[h->free_head];
  uint64_t w = token((uint32_t)h->free_head, sl->gen);
  struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = w};
  if (epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev)) {
    pthread_mutex_unlock(&h->lock);
    return 0;
  }
  h->free_head = sl->next_free;
  sl->item = item;
  sl->fd = fd;
  pthread_mutex_unlock(&h->lock);
  return w;
}

void pr__hangup_remove(pr_hangup_t *h, uint64_t w) {
  if (!w) return;
  pthread_mutex_lock(&h->lock);
  slot_t *sl = slot_of(h, w);
  if (sl) {
    epoll_ctl(h->ep, EPOLL_CTL_DEL, sl->fd, NULL);
    release(h, sl);
  }
  pthread_mutex_unlock(&h->lock);
}

void pr__hangup_stop(pr_hangup_t *h) {
  if (!h) return;
  uint64_t one = 1;
  if (write(h->stop_fd, &one, sizeof one) == sizeof one) pthread_join(h->thread, NULL);
  close(h->stop_fd);
  close(h->ep);
  pthread_mutex_destroy(&h->lock);
  free(h->slots);
  free(h);
}
