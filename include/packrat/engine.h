/* packrat engine: load an ONNX model and run it on the CPU.
 *
 * Usable on its own by any C program:
 *
 *   pr_model_t *m;  char err[512];
 *   if (pr_engine_model_load_file("model.onnx", &m, err, sizeof err)) die(err);
 *   pr_session_options_t opt = pr_session_options_default();
 *   opt.threads = 4; opt.batch = 8;
 *   pr_session_t *s;
 *   if (pr_engine_session_create(m, &opt, &s, err, sizeof err)) die(err);
 *   pr_tensor_t in = {...}, out;
 *   pr_engine_session_run(s, &in, 1, &out, 1, err, sizeof err);
 *   pr_engine_session_destroy(s); pr_engine_model_destroy(m);
 *
 * Ownership: a model owns its weights; sessions borrow them (many sessions of
 * one model share one copy) and must be destroyed before the model. A session
 * owns its output buffers: the views returned by run stay valid until the next
 * run or destroy. One session runs on one thread at a time; different sessions
 * may run concurrently on different threads.
 */
#ifndef PACKRAT_ENGINE_H
#define PACKRAT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default) /* the public API: exported */

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: 0 is success, errors are negative. */
typedef int pr_status_t;
enum {
  PR_OK = 0,
  PR_ERR_INVALID = -1,     /* bad argument or malformed input */
  PR_ERR_UNSUPPORTED = -2, /* valid ONNX that this engine does not run */
  PR_ERR_IO = -3,          /* file could not be read or written */
  PR_ERR_NOMEM = -4,       /* allocation failed or a size overflowed */
  PR_ERR_INTERNAL = -5,    /* a library call failed unexpectedly */
  PR_ERR_NOT_FOUND = -6,   /* named thing does not exist */
  PR_ERR_BUSY = -7,        /* a limit is reached (queue full, bytes in flight); retry later */
  PR_ERR_TIMEOUT = -8,     /* the deadline passed before the work was done */
  PR_ERR_TOO_LARGE = -9,   /* an input is over a size limit (e.g. a request body) */
};

/* Element types, numbered as ONNX TensorProto.DataType. */
typedef enum {
  PR_DTYPE_UNDEFINED = 0,
  PR_DTYPE_FLOAT = 1,
  PR_DTYPE_UINT8 = 2,
  PR_DTYPE_INT8 = 3,
  PR_DTYPE_UINT16 = 4,
  PR_DTYPE_INT16 = 5,
  PR_DTYPE_INT32 = 6,
  PR_DTYPE_INT64 = 7,
  PR_DTYPE_STRING = 8,
  PR_DTYPE_BOOL = 9,
  PR_DTYPE_FLOAT16 = 10,
  PR_DTYPE_DOUBLE = 11,
  PR_DTYPE_UINT32 = 12,
  PR_DTYPE_UINT64 = 13,
} pr_dtype_t;

#define PR_MAX_RANK 8
/* Models of opsets 1 to PR_MAX_OPSET (default domain) load when every node's
 * operator version is implemented; others are refused naming the node. */
#define PR_MAX_OPSET 21

/* The operators the engine implements (default domain), in a fixed order:
 * pr_engine_op_count() of them; pr_engine_op(i) writes operator i's ONNX
 * name and the lowest opset whose version of it is implemented (every
 * later one up to PR_MAX_OPSET is). PR_ERR_INVALID for a bad index. */
int pr_engine_op_count(void);
pr_status_t pr_engine_op(int i, const char **name, int *min_opset);

/* Description of a graph input or output. dims[k] < 0 means symbolic; its
 * name (if the model names it) is in dim_names[k], else NULL. Strings are
 * owned by the model. */
typedef struct {
  const char *name;
  pr_dtype_t dtype;
  int rank;
  int64_t dims[PR_MAX_RANK];
  const char *dim_names[PR_MAX_RANK];
} pr_tensor_info_t;

/* A dense row-major tensor view. The memory is owned by whoever made it. */
typedef struct {
  pr_dtype_t dtype;
  int rank;
  int64_t dims[PR_MAX_RANK];
  void *data;
} pr_tensor_t;

typedef struct pr_model pr_model_t;
typedef struct pr_session pr_session_t;

/* Session options. threads: OpenMP team size of the session (>= 1).
 * batch: value for symbolic dims at axis 0 of the inputs (1..2^20).
 * dim_names/dim_values: values for other named symbolic dims.
 * input_shapes: optional concrete shapes, one per graph input, overriding
 * batch and dim values (used when inputs are already at hand; batch is then
 * not read, and a dimension may be 0: zero-size tensors).
 * input_values: optional, one pointer per graph input (NULL entries allowed):
 * a non-NULL entry fixes that input's value at compile time (it must then be
 * given its shape in input_shapes), so that values which decide shapes, such
 * as a Reshape target fed as an input, are known. Runs must pass the same
 * value; a different one is an error. */
typedef struct {
  int threads;
  int64_t batch;
  int n_dims;
  const char *const *dim_names;
  const int64_t *dim_values;
  const pr_tensor_info_t *input_shapes;
  const void *const *input_values;
  int disable_fusion;  /* non-zero: no graph fusions (for checking them) */
  size_t max_bytes;    /* limit on any one intermediate and on the arena (0: 16 GiB) */
  int profile_kernels; /* non-zero: time every kernel of every run (see session_kernel) */
  int precision;       /* PR_PRECISION_FP32 (0) or PR_PRECISION_BF16 */
} pr_session_options_t;

/* The arithmetic of a session. BF16: convolutions and the linear MatMul
 * (constant B) take bf16 weights and activations and accumulate in fp32
 * (their outputs and every other operator stay fp32); only where the CPU
 * has native bf16 (AVX512_BF16 or AMX; pr_engine_bf16_native), elsewhere
 * session creation refuses it. */
enum { PR_PRECISION_FP32 = 0, PR_PRECISION_BF16 = 1 };
/* "fp32", "bf16"; NULL for another value. */
const char *pr_precision_name(int precision);
/* The precision named `name` ("fp32", "bf16"), or -1. */
int pr_precision_parse(const char *name);
/* Non-zero where the kernels run bf16 natively (ONEDNN_MAX_CPU_ISA caps it). */
int pr_engine_bf16_native(void);

/* Size in bytes of one element of dtype, 0 for unsupported/undefined. */
size_t pr_dtype_size(pr_dtype_t dtype);
/* ONNX name of dtype ("FLOAT", "INT64", ...). */
const char *pr_dtype_name(pr_dtype_t dtype);
/* Number of elements of a tensor view. */
int64_t pr_tensor_numel(const pr_tensor_t *t);

/* Load a model from an ONNX file. External data files are resolved relative
 * to the file's directory. On error returns < 0 and writes a message naming
 * the problem (and the node, for unsupported ops) into err. */
pr_status_t pr_engine_model_load_file(const char *path, pr_model_t **out, char *err,
                                      size_t err_len);
/* Load a model from memory; base_dir (may be NULL) resolves external data. */
pr_status_t pr_engine_model_load_memory(const void *data, size_t len, const char *base_dir,
                                        pr_model_t **out, char *err, size_t err_len);
void pr_engine_model_destroy(pr_model_t *model);

int pr_engine_model_num_inputs(const pr_model_t *model);
int pr_engine_model_num_outputs(const pr_model_t *model);
/* Fill info for input/output i; returns PR_ERR_INVALID for a bad index. */
pr_status_t pr_engine_model_input(const pr_model_t *model, int i, pr_tensor_info_t *info);
pr_status_t pr_engine_model_output(const pr_model_t *model, int i, pr_tensor_info_t *info);
/* SHA-256 of the model file's bytes as 64 hex chars. */
const char *pr_engine_model_sha256(const pr_model_t *model);

/* Bytes of reordered weights the model's sessions currently share. */
size_t pr_engine_model_shared_weight_bytes(pr_model_t *model);

pr_session_options_t pr_session_options_default(void);

/* The kernel library the engine runs on, as text: "oneDNN 2.6.3 (commit
 * 1234abc, CPU runtime OpenMP)". Static storage; thread-safe. */
const char *pr_engine_backend_version(void);

/* The instruction set the kernels run with on this machine, as oneDNN
 * picks it (ONEDNN_MAX_CPU_ISA caps it): "avx512_core_amx",
 * "avx512_core_bf16", "avx512_core_vnni", "avx512_core", "avx2_vnni",
 * "avx2", "avx", "sse41" or "other". Static storage. */
const char *pr_engine_isa(void);

/* The kernel of the float MatMul with a constant B (the transformers'
 * linear layers) on this machine: "packrat_avx2" (packrat's own, where
 * oneDNN runs AVX2 but no AVX-512) or "onednn". Static storage. */
const char *pr_engine_matmul_kernel(void);

/* Compile the model for the given options: resolve shapes, fold constants,
 * fuse, plan memory and create the kernels with opt->threads threads.
 * A model where a value known only at run time decides a shape (control
 * flow, NonZero, a Range or Reshape of computed values...) gets a dynamic
 * session: each run compiles the model for that run's input data, and the
 * output shapes are known after a run (see session_is_dynamic). */
pr_status_t pr_engine_session_create(pr_model_t *model, const pr_session_options_t *opt,
                                     pr_session_t **out, char *err, size_t err_len);
void pr_engine_session_destroy(pr_session_t *session);
/* Whether the session runs on the dynamic path (slower: a compile per run). */
bool pr_engine_session_is_dynamic(const pr_session_t *s);

/* Floating-point operations of one run of the session (convolutions and
 * matrix products, 2 per multiply-add), from its concrete shapes. */
double pr_engine_session_flops(const pr_session_t *s);
/* Number of kernels one run executes (after folding and fusion). */
int pr_engine_session_num_kernels(const pr_session_t *s);
/* Kernel i of the session in run order: its op ("Conv", "MatMul", or a
 * compiler-made kernel such as "LayerNorm"), the ONNX node it came from, the
 * oneDNN implementation that runs it ("" for packrat's own kernels; "ref..."
 * is oneDNN's slow reference code), its FLOPs per run and, with
 * profile_kernels, its total seconds over `runs` runs. */
typedef struct {
  const char *op;
  const char *node;
  const char *impl;
  double flops;
  double seconds;
  int64_t runs;
} pr_kernel_info_t;
pr_status_t pr_engine_session_kernel(const pr_session_t *s, int i, pr_kernel_info_t *info);
/* Zero the kernel times (e.g. after warm-up runs). */
void pr_engine_session_kernel_reset(pr_session_t *s);
/* Bytes of the session's activation arena (intermediate buffers). */
size_t pr_engine_session_arena_bytes(const pr_session_t *s);
/* Concrete shapes of the session's inputs and outputs (a dynamic session's
 * outputs: those of its last run; before one, the model's declared ones,
 * -1 for a dim not known). */
pr_status_t pr_engine_session_input(const pr_session_t *s, int i, pr_tensor_info_t *info);
pr_status_t pr_engine_session_output(const pr_session_t *s, int i, pr_tensor_info_t *info);

/* Run once. inputs: one per graph input in graph order, with the session's
 * dtypes and shapes. outputs: filled with views of the session's output
 * buffers, valid until the next run or destroy. Must be called from one
 * thread at a time per session; it uses session->threads OpenMP threads.
 * PR_ERR_INVALID, with err naming the node, for input data a kernel refuses
 * (an index outside [-n, n-1] in Gather, GatherElements, GatherND, the
 * Scatters, MaxUnpool, the losses' labels, RoiAlign's batch indices,
 * ReverseSequence's lengths): the outputs are then not valid. */
pr_status_t pr_engine_session_run(pr_session_t *s, const pr_tensor_t *inputs, int n_inputs,
                                  pr_tensor_t *outputs, int n_outputs, char *err, size_t err_len);

/* Tensor files. Reads an ONNX TensorProto (.pb) or NumPy (.npy) file into a
 * newly allocated tensor (free with pr_engine_tensor_free); name_out (may be
 * NULL) receives the TensorProto's name (malloc'd, may be NULL). */
pr_status_t pr_engine_tensor_read_file(const char *path, pr_tensor_t *out, char **name_out,
                                       char *err, size_t err_len);
pr_status_t pr_engine_tensor_write_pb(const char *path, const pr_tensor_t *t, const char *name);
pr_status_t pr_engine_tensor_write_npy(const char *path, const pr_tensor_t *t);
void pr_engine_tensor_free(pr_tensor_t *t);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
