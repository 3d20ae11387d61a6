/* Wire-format pre-scan of a protobuf message before protobuf-c unpacks it:
 * protobuf-c 1.4.1 recurses once per nested message without a limit, so an
 * ONNX file of a few kilobytes nesting TypeProtos 10,000 deep (or If
 * subgraphs 3,000 deep) overflows the stack in onnx__model_proto__unpack.
 * This walk reads the same bytes with an explicit stack of max_depth
 * frames, guided by protobuf-c's runtime descriptors, and refuses what is
 * too deep, holds too many items to allocate, or is malformed.
 *
 * Notes on the design:
 * - Only length-delimited fields whose descriptor says MESSAGE are entered:
 *   protobuf-c recurses exactly there. Every other field, and every field
 *   the descriptor does not know (protobuf-c keeps those as bytes), is
 *   skipped by its wire type. Groups (wire types 3 and 4), which protobuf-c
 *   refuses too, are malformed here.
 * - The items protobuf-c allocates one by one are counted: messages,
 *   strings and bytes, unknown fields. Each costs tens to hundreds of bytes
 *   unpacked from as few as 2 bytes of file, so their count, not the
 *   file's size, bounds what an unpack allocates. (Packed numbers cost at
 *   most 8 bytes for each byte of file: the file's size bounds those.)
 * - Varints and lengths are read as protobuf-c reads them: a tag or a
 *   length in at most 5 bytes and 32 bits, other varints in at most 10
 *   bytes; nothing is read past the end of the enclosing message, and a
 *   nested message must end exactly where its length says.
 * - The walk allocates nothing; its stack is max_depth frames, bounded by
 *   MAX_FRAMES whatever a caller asks. */
#include "engine/onnx_prescan.h"

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/log.h"

#define MAX_FRAMES 256

typedef struct {
  const ProtobufCMessageDescriptor *desc;
  const uint8_t *end; /* one past the message's last byte */
} frame_t;

/* Reads a varint of at most max_bytes at *p (before end) into *v (its low
 * 64 bits); false when it runs past end or is longer. */
static bool read_varint(const uint8_t **p, const uint8_t *end, int max_bytes, uint64_t *v) {
  uint64_t x = 0;
  for (int i = 0; i < max_bytes; i++) {
    if (*p + i >= end) return false;
    uint8_t b = (*p)[i];
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *p += i + 1;
      *v = x;
      return true;
    }
  }
  return false;
}

static pr_status_t malformed(const uint8_t *start, const uint8_t *at, const char *what, char *err,
                             size_t err_len) {
  pr__errf(err, err_len, "malformed protobuf data at byte %zu: %s", (size_t)(at - start), what);
  return PR_ERR_INVALID;
}

pr_status_t pr_engine__proto_prescan(const void *data, size_t len,
                                     const ProtobufCMessageDescriptor *desc, int max_depth,
                                     size_t max_items, char *err, size_t err_len) {
  frame_t stack[MAX_FRAMES];
  if (max_depth < 1 || max_depth > MAX_FRAMES) max_depth = MAX_FRAMES;
  if (!len) return PR_OK; /* an empty message (and no arithmetic on NULL) */
  if (!data) return malformed(data, data, "no data", err, err_len);
  const uint8_t *start = data, *p = start;
  int depth = 0;    /* index of the innermost frame */
  size_t items = 1; /* the top message */
  stack[0] = (frame_t){.desc = desc, .end = start + len};
  for (;;) {
    frame_t *f = &stack[depth];
    if (p == f->end) {
      if (depth == 0) return PR_OK;
      depth--;
      continue;
    }
    const uint8_t *field_at = p;
    uint64_t tag, len64;
    if (!read_varint(&p, f->end, 5, &tag) || tag > UINT32_MAX)
      return malformed(start, field_at, "bad field tag", err, err_len);
    uint32_t number = (uint32_t)(tag >> 3), wire = (uint32_t)(tag & 7);
    if (number == 0) return malformed(start, field_at, "field number 0", err, err_len);
    const ProtobufCFieldDescriptor *fd =
        f->desc ? protobuf_c_message_descriptor_get_field(f->desc, number) : NULL;
    bool allocated = !fd || (wire == 2 && (fd->type == PROTOBUF_C_TYPE_MESSAGE ||
                                           fd->type == PROTOBUF_C_TYPE_STRING ||
                                           fd->type == PROTOBUF_C_TYPE_BYTES));
    if (allocated && ++items > max_items) {
      pr__errf(err, err_len, "model holds more than %zu messages, strings and unknown fields",
               max_items);
      return PR_ERR_INVALID;
    }
    switch (wire) {
      case 0: /* varint */
        if (!read_varint(&p, f->end, 10, &len64))
          return malformed(start, field_at, "bad varint", err, err_len);
        break;
      case 1: /* 64-bit */
      case 5: /* 32-bit */ {
        size_t n = wire == 1 ? 8 : 4;
        if ((size_t)(f->end - p) < n)
          return malformed(start, field_at, "truncated fixed-size field", err, err_len);
        p += n;
        break;
      }
      case 2: { /* length-delimited */
        if (!read_varint(&p, f->end, 5, &len64) || len64 > UINT32_MAX)
          return malformed(start, field_at, "bad length", err, err_len);
        if (len64 > (uint64_t)(f->end - p))
          return malformed(start, field_at, "length past the end of its message", err, err_len);
        if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) {
          p += len64;
          break;
        }
        if (depth + 1 >= max_depth) {
          pr__errf(err, err_len, "model nests messages deeper than %d levels", max_depth);
          return PR_ERR_INVALID;
        }
        stack[++depth] = (frame_t){.desc = fd->descriptor, .end = p + len64};
        break;
      }
      default: return malformed(start, field_at, "unsupported wire type", err, err_len);
    }
  }
}
