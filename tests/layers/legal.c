/* The positive control of tests/layers: includes a layer may make compile
 * with the same flags (the engine's: base and its own public header). */
#include "base/log.h"
#include "base/util.h"
#include "packrat/engine.h"

int pr_layers_legal(void) {
  return PR_OK;
}
