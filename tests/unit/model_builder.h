/* Builds small ONNX models in memory for tests (protobuf-c structs). */
#ifndef PR_TEST_MODEL_BUILDER_H
#define PR_TEST_MODEL_BUILDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct mb mb_t;

mb_t *mb_new(int opset);
/* dims < 0 become a symbolic dim named "batch" (axis 0) or "d<k>"; rank < 0:
 * no shape at all (a subgraph's input). */
void mb_input(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims);
void mb_output(mb_t *b, const char *name);
void mb_init(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims,
             const void *data, size_t nbytes);
/* An initializer whose data lives in an external file (relative location). */
void mb_init_external(mb_t *b, const char *name, int elem_type, int rank, const int64_t *dims,
                      const char *location, long offset, long length);
/* inputs/outputs: NULL-terminated lists; returns the node index for attributes. */
int mb_node(mb_t *b, const char *op, const char *name, const char *const *inputs,
            const char *const *outputs);
void mb_attr_int(mb_t *b, int node, const char *name, int64_t v);
void mb_attr_float(mb_t *b, int node, const char *name, float v);
void mb_attr_ints(mb_t *b, int node, const char *name, int n, const int64_t *v);
void mb_attr_string(mb_t *b, int node, const char *name, const char *v);
/* A GRAPH attribute: body (made with mb_new; its opset is ignored) becomes
 * the attribute's graph and is freed with b. */
void mb_attr_graph(mb_t *b, int node, const char *name, mb_t *body);
/* Serialize; *data is malloc'd. Frees the builder. */
void mb_finish(mb_t *b, void **data, size_t *len);
/* Serialize and load with the engine; NULL with err on failure. Frees the builder. */
struct pr_model *mb_load(mb_t *b, char *err, size_t err_len);

/* The model x[dims] -> Neg -> y (float; a -1 dim is symbolic, as mb_input
 * makes it), loaded; NULL with err. */
struct pr_model *mb_neg_model(int rank, const int64_t *dims, char *err, size_t err_len);

#endif
