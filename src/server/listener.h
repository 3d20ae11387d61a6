/* The HTTP front end's listening socket and the thread that accepts from
 * it, handing each connection to the server (libmicrohttpd's
 * MHD_add_connection). libmicrohttpd does not listen itself: its way of
 * stopping to accept (MHD_quiesce_daemon) races its own epoll threads on
 * removing the socket from their epoll sets and aborts the process when it
 * loses (a SIGTERM while connections arrive killed the server with
 * SIGABRT); here stopping is this thread's alone.
 *
 * Notes on the design:
 * - While full() says so (the connection limit reached) nothing is
 *   accepted: new connections wait in the kernel's backlog, as they would
 *   with libmicrohttpd listening.
 * - pr__listener_stop ends the thread and gives the still-open socket back,
 *   so that the connections waiting in its backlog can be served before it
 *   is closed (server.c's drain).
 * - IPv6 addresses listen on IPv6 only (IPV6_V6ONLY), SO_REUSEADDR set, the
 *   backlog SOMAXCONN. */
#ifndef PR_SERVER_LISTENER_H
#define PR_SERVER_LISTENER_H

#include <stdbool.h>
#include <sys/socket.h>

#include "packrat/engine.h"

typedef struct pr_listener pr_listener_t;

/* Binds addr and listens; *port: the port bound (addr's, or the one the
 * kernel chose for 0). */
pr_status_t pr__listener_open(const struct sockaddr_storage *addr, pr_listener_t **out, int *port,
                              char *err, size_t err_len);

/* Starts the accepting thread: each accepted connection goes to add (which
 * owns it from then on, closing it when it cannot serve it); while full()
 * is true, none is accepted. */
pr_status_t pr__listener_start(pr_listener_t *l,
                               void (*add)(void *ctx, int fd, const struct sockaddr *a,
                                           socklen_t len),
                               bool (*full)(void *ctx), void *ctx);

/* Ends the accepting thread and frees l; returns the listening socket,
 * still open (the caller closes it), or -1. */
int pr__listener_stop(pr_listener_t *l);

#endif
