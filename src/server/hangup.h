/* A thread that watches sockets for their peer going away (EPOLLRDHUP,
 * EPOLLHUP, EPOLLERR) while the server holds them idle: the HTTP front
 * end's suspended connections, which libmicrohttpd does not poll, so that
 * a request whose client closed its connection leaves the queue unrun.
 *
 * Each watch is an fd and an item, one-shot. When its peer goes, the
 * thread calls take(item) under the watcher's lock, the lock that
 * pr__hangup_remove takes too: an owner that removes the watch before
 * freeing the item (and before anything else may free it) keeps the item
 * alive across take. A take that returns true keeps it alive until
 * finish(item), which runs after the lock is released (so that it may
 * complete the item, and its completion remove the watch). Lock order:
 * whatever the owner holds around add and remove, then the watcher's,
 * then whatever take takes. */
#ifndef PR_SERVER_HANGUP_H
#define PR_SERVER_HANGUP_H

#include <stdbool.h>
#include <stdint.h>

#include "packrat/engine.h"

typedef struct pr_hangup pr_hangup_t;

pr_status_t pr__hangup_start(bool (*take)(void *item), void (*finish)(void *item),
                             pr_hangup_t **out, char *err, size_t err_len);
/* Watches fd for item; returns the watch (never 0), or 0 when it cannot
 * (out of memory, an fd epoll refuses): the item is then not watched. */
uint64_t pr__hangup_add(pr_hangup_t *h, int fd, void *item);
/* Ends a watch (0: none); take never runs for it once this returns. */
void pr__hangup_remove(pr_hangup_t *h, uint64_t watch);
/* Joins the thread; every watch must have been removed. */
void pr__hangup_stop(pr_hangup_t *h);

#endif
