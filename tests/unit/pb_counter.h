/* A protobuf-c allocator that adds up what an unpack asks for, in the units
 * of grpc_codec.c's cost (glibc's malloc chunks: the size and an 8-byte
 * header rounded up to 16, at least 32), for the unit test and the fuzz
 * target that check the wire check's bound. One counter per program. */
#ifndef PR_TESTS_PB_COUNTER_H
#define PR_TESTS_PB_COUNTER_H

#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>

static size_t pb_counted; /* bytes since the last reset */

static void *pb_count_alloc(void *ctx, size_t n) {
  (void)ctx;
  pb_counted += n + 8 < 32 ? 32 : (n + 8 + 15) & ~(size_t)15;
  return malloc(n);
}

static void pb_count_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

static ProtobufCAllocator pb_counter = {pb_count_alloc, pb_count_free, NULL};

#endif
