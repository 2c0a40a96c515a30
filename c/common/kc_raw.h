/* kc_raw.h — the raw capture both capture libraries write (docs/raw-capture.md, raw_version 2;
 * checked on the TypeScript side by src/capture/raw.ts): chunked memory items and raw.json.
 *
 * An item is one live range (an allocation or a module global) cut into chunks of `chunk` bytes
 * (the last one may be shorter). Each chunk has a kc64 (c/common/kc_hash.h) and a non-zero flag, before
 * and after the launch; the stored chunks of each state are extents [first chunk, count, file
 * offset] in memory/before.bin or memory/after.bin, each extent at a KC_ALIGN-aligned offset.
 * The CUDA library fills items through its GPU scan (c/cuda/kc_snapshot.c) or kc_item_cpu_pass; the
 * HSA library through kc_item_cpu_pass only (hashed_on "cpu").
 */
#ifndef KC_RAW_H
#define KC_RAW_H
#include "kc_hash.h"
#include "kc_json.h"
#include "kc_process.h"
#include "kc_vec.h"
#include <stdint.h>
#include <stdio.h>

#define KC_RAW_VERSION 2

typedef struct { uint64_t first, count, offset; } kc_extent_t; /* chunk range, file offset (bytes) */

typedef struct {
  KC_VEC(kc_extent_t) x;
  KC_VEC(uint64_t) hash; /* kc64 of each stored chunk, in extent order */
} kc_stored_t;

typedef struct {
  uint64_t va, size;       /* bytes */
  const char *kind;        /* raw.json region kind: device, pitched, managed, vmm, async, host-mapped, global */
  const char *name;        /* module globals; else NULL */
  uint64_t nchunks;
  int gpu;                 /* hashed by the GPU scan kernel (else on the CPU) */
  uint64_t *hb, *ha;       /* kc64 per chunk, before / after */
  uint8_t *zb, *za;        /* non-zero flag per chunk, before / after */
  kc_stored_t before, after;
  uint64_t changed_chunks, changed_bytes; /* bytes of the chunks that changed */
} kc_item_t;

/* Snapshot chunk size (bytes): KERNCAP_CHUNK_BYTES when it is a power of two from 64 KiB to
 * 64 MiB, else KC_CHUNK_DEFAULT. */
uint32_t kc_chunk_bytes(void);
/* Set up an item of `size` bytes at va (per-chunk tables zeroed). 0, or -1 (KC_FAIL: out of memory). */
int kc_item_init(kc_item_t *it, uint64_t va, uint64_t size, const char *kind, const char *name, uint32_t chunk);
void kc_item_free(kc_item_t *it);
/* Bytes of chunk c of it (chunk bytes, the last one shorter). */
uint64_t kc_chunk_len(const kc_item_t *it, uint32_t chunk, uint64_t c);
/* x rounded up to KC_ALIGN. */
uint64_t kc_align_up(uint64_t x);
/* Record that chunk chunk_index (kc64 h) is stored at file_off: extends the last extent when it
 * continues it in both chunk and file, else opens a new one. 0, or -1 (out of memory). */
int kc_stored_push(kc_stored_t *st, uint64_t chunk_index, uint64_t h, uint64_t file_off, uint32_t chunk);
/* After the after pass: changed_chunks and changed_bytes from it->after's extents. */
void kc_item_count_changes(kc_item_t *it, uint32_t chunk);
/* Chunk c should be stored in pass which: 0 (before) when non-zero, 1 (after) when changed. */
static inline int kc_item_stores(const kc_item_t *it, int which, uint64_t c) {
  return which ? (it->ha[c] != it->hb[c] || it->za[c] != it->zb[c]) : it->zb[c];
}

/* Copy len bytes at va into dst (host memory). 0, or -1 after reporting the failure (KC_FAIL). */
typedef int (*kc_read_fn)(void *ud, uint64_t va, void *dst, size_t len);

/* One CPU pass over an item: each chunk is read into buf (at least `chunk` bytes), hashed, and
 * stored when kc_item_stores says so, consecutive stored chunks packed into one extent. */
typedef struct {
  uint32_t chunk;
  int which;               /* 0 before, 1 after */
  char *buf;
  kc_read_fn read;
  void *ud;
  int fd;                  /* the pass's memory file */
  uint64_t *next_off;      /* in: where the item's first extent may go; out: the next free aligned offset */
  uint64_t *stored_bytes;  /* incremented by the bytes stored */
  uint64_t *progress;      /* incremented by the bytes stored, or NULL */
  int *werr;               /* set to errno when a write fails (ENOSPC for a short one) */
  uint64_t *wfail_off;     /* the file offset of that write */
} kc_cpu_pass_t;
/* 0, -1 when a read failed (reported by the reader) or a write failed (*werr set; the caller
 * reports it with the folder's context). */
int kc_item_cpu_pass(kc_item_t *it, const kc_cpu_pass_t *p);

/* ---- raw.json ---- */
typedef struct { int id; const char *name; const void *value; size_t value_size; } kc_raw_launch_attr_t;
typedef struct { int id; const char *name; int value; } kc_raw_func_attr_t;
typedef struct { const char *key; const char *fmt; double value; } kc_raw_time_t; /* fmt: printf of one double */

/* Everything raw.json says, filled by the library that captured. Optional parts are left out of
 * the document when their pointer is NULL or their flag 0. */
typedef struct {
  const char *library;     /* "kerncap_cuda 0.1.0" */
  const char *frontend;    /* cuda | triton | hip (kerncap may reassign triton) */
  /* kernel */
  const char *name, *demangled;
  int64_t match_index;
  uint64_t launch_index;
  int counts_benchmarks;   /* -1: not written */
  /* device */
  const char *vendor, *device_name, *arch;
  int64_t driver_version, ordinal;
  /* process (c/common/kc_process.h) */
  const kc_proc_t *proc;
  const char *const *visible_vars;
  const char *device_uuid, *pci_bus_id; /* NULL: unknown */
  int has_target; int64_t target;      /* several captures in one run */
  int has_graph; int64_t graph_id; uint64_t graph_node;
  /* launch */
  const char *api;
  unsigned grid[3], block[3], cluster[3];
  uint64_t shared_mem_bytes;
  const kc_raw_launch_attr_t *attrs; size_t nattrs;
  const kc_raw_func_attr_t *func_attrs; size_t nfunc_attrs;
  /* params */
  const char *params_file;
  uint64_t params_size;
  const char *layout_source;
  size_t nparams;
  const size_t *param_offset, *param_size; /* bytes, per parameter */
  /* module: NULL file writes "module": null */
  const char *module_file, *module_kind, *module_source;
  uint64_t module_size;
  int has_module_id; uint64_t module_id;
  /* memory */
  uint32_t chunk;
  uint64_t live_bytes, stored_before_bytes, stored_after_bytes;
  int hashed_on_gpu;
  const char *gpu_scan_unavailable; /* why not (NULL when hashed on the GPU) */
  const kc_item_t *items; size_t nregions, nglobals; /* regions, then globals */
  /* fault of the captured launch */
  int has_fault; int64_t fault_code; const char *fault_name, *fault_message;
  const char *app_launch_method;   /* NULL: not written */
  int has_globals_scan; int64_t globals_symbols, globals_unreadable; /* the count of globals is nglobals */
  const kc_raw_time_t *timing; size_t ntiming;
  /* hsa block (HSA library); else "hsa": null */
  int has_hsa;
  uint64_t hsa_kernel_object, hsa_group_segment_size, hsa_private_segment_size, hsa_kernarg_address, hsa_runtime_version;
} kc_raw_t;

/* Several captures in one run: make out/captures/<n>/ with kernel/ and memory/ in it, its path in
 * dst (dn bytes). 0, or -1 (KC_FAIL with the cause). */
int kc_raw_capture_dir(const char *out, int n, char *dst, size_t dn);

/* Write dir/raw.json (through raw.json.part and a rename: its presence means the capture is
 * complete). 0, or -1 (KC_FAIL with the cause). */
int kc_raw_write(const char *dir, const kc_raw_t *r);
#endif
