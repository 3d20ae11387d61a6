/* Graph fusions applied by the session compiler after constant folding:
 * BatchNormalization folded into the preceding Conv, and element-wise
 * activations and residual Adds turned into post-ops of Conv/Gemm. */
#ifndef PR_ENGINE_FUSE_H
#define PR_ENGINE_FUSE_H

#include "engine/graph.h"

/* Needs use counts (n_uses) up to date; leaves fused-away nodes dead. */
pr_status_t pr_fuse(pr_compile_t *c);

#endif
