/* Must NOT compile with the engine's include flags: the engine is below the
 * server, so the server's headers are not on its include path (CMakeLists.txt,
 * "layers"). The test passes only on the "file not found" error. */
#include "server/protocol.h"

int pr_layers_upward(void);
