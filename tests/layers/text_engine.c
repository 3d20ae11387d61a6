/* Must NOT compile with the text layer's include flags: the text layer sees
 * base and its own public header only (CMakeLists.txt, "layers"), not the
 * engine's internals. The test passes only on the "file not found" error. */
#include "engine/graph.h"

int pr_layers_text_engine(void);
