/* kc_hash.h — kc64, the per-chunk checksum of kerncap's memory snapshots (format "kc64/1").
 *
 * Why not SHA-256: the capture library computes it on the GPU over every live chunk (c/cuda/kc_scan.cu,
 * ~TB/s), so zero and unchanged chunks are found without copying them to the host, and replay checks
 * restored memory on the device. It must be cheap on a GPU, word-parallel and reproducible on the
 * CPU (this file, and src/format/kc64.ts): a sum of position-keyed mixes, not a chain.
 *
 * Definition, for a chunk of `len` bytes: words w_j (j = 0 .. ceil(len/4)-1) are the little-endian
 * u32 of bytes [4j, 4j+4), zero-padded past len;  t_j = fmix32(w_j ^ (j*0x9E3779B1 + 0x7F4A7C15));
 * A = sum t_j, B = sum t_j*(2j+1) (mod 2^32); kc64 = fmix32(A ^ len) << 32 | fmix32(B + len*0x85EBCA6B).
 * fmix32 is MurmurHash3's finalizer (a bijection), so changing one word always changes A.
 * Integrity against accidental damage and a changed-chunk test, not a cryptographic hash.
 * Header-only; shared by both capture libraries and c/test/.
 */
#ifndef KC_HASH_H
#define KC_HASH_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KC_HASH_NAME "kc64/1"
/* Snapshot chunk size (bytes) unless KERNCAP_CHUNK_BYTES says otherwise; a power of two. */
#define KC_CHUNK_DEFAULT (1u << 20)
/* Offsets of stored extents in the memory files are multiples of this (bytes). */
#define KC_ALIGN (64u << 10)

static inline uint32_t kc_fmix32(uint32_t h) {
  h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
  return h;
}

/* kc64 of p[0..len). Also reports whether any byte is non-zero (*nz; may be NULL). */
static inline uint64_t kc_hash64(const void *p, size_t len, int *nz) {
  const unsigned char *b = (const unsigned char *)p;
  uint32_t A = 0, B = 0, any = 0;
  size_t words = (len + 3) / 4;
  for (size_t j = 0; j < words; j++) {
    uint32_t w = 0;
    size_t o = j * 4;
    if (o + 4 <= len) memcpy(&w, b + o, 4);
    else for (size_t k = 0; o + k < len; k++) w |= (uint32_t)b[o + k] << (8 * k);
    any |= w;
    uint32_t t = kc_fmix32(w ^ ((uint32_t)j * 0x9E3779B1u + 0x7F4A7C15u));
    A += t;
    B += t * (uint32_t)(2 * j + 1);
  }
  if (nz) *nz = any != 0;
  uint32_t L = (uint32_t)len;
  return ((uint64_t)kc_fmix32(A ^ L) << 32) | kc_fmix32(B + L * 0x85EBCA6Bu);
}
#endif
