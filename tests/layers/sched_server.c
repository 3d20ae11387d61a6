/* Must NOT compile with the scheduler's include flags: the server (HTTP,
 * gRPC, the codec, the registry) is above the scheduler. */
#include "server/protocol.h"

int pr_layers_sched_server(void);
