/* Statuses of the HTTP front end, beside the engine's (packrat/engine.h):
 * refusals by the router or the transport before any model sees a request.
 * Like every pr_status_t, they become HTTP codes in pr__proto_http_status
 * only. */
#ifndef PR_SERVER_STATUS_H
#define PR_SERVER_STATUS_H

#include "packrat/engine.h"
#include "sched/request.h" /* PR_ERR_CANCELLED (-105) */

enum {
  PR_ERR_METHOD = -100,       /* the path is routed, not for this method (405) */
  PR_ERR_URI_TOO_LONG = -101, /* the path is longer than the router takes (414) */
  PR_ERR_CODING = -102,       /* a Transfer-Encoding the server does not implement (501) */
  PR_ERR_UNAUTHORIZED = -103, /* no bearer token, or one that is not known (401) */
  PR_ERR_FORBIDDEN = -104,    /* a known token without the right (403) */
  /* the model's load failed or it was unloaded: 503 without Retry-After
   * (gRPC FAILED_PRECONDITION), since retrying alone cannot help */
  PR_ERR_MODEL_UNAVAILABLE = -106,
};

#endif
