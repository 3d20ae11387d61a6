/* libFuzzer target: arbitrary bytes as an ONNX model. Loading must either
 * succeed or fail with an error; a loaded model is also compiled at batch 1
 * (shape inference, folding, fusion, planning) when it is small. Never a
 * crash, leak or undefined behaviour.
 *
 * Build: cmake -B build-fuzz -DPR_FUZZ=ON -DCMAKE_C_COMPILER=clang && cmake --build build-fuzz
 * --target fuzz_loader Run:   build-fuzz/tests/fuzz/fuzz_loader -max_total_time=600
 * -rss_limit_mb=4096 tests/fuzz/corpus */
#include <stddef.h>
#include <stdint.h>

#include "packrat/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pr_model_t *m = NULL;
  char err[256];
  if (pr_engine_model_load_memory(data, size, NULL, &m, err, sizeof err) != PR_OK) return 0;
  pr_session_options_t opt = pr_session_options_default();
  opt.max_bytes = (size_t)64 << 20; /* fuzzed shapes may ask for anything */
  pr_session_t *s = NULL;
  if (size < 4096 && pr_engine_session_create(m, &opt, &s, err, sizeof err) == PR_OK)
    pr_engine_session_destroy(s);
  pr_engine_model_destroy(m);
  return 0;
}
