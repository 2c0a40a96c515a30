/* kc_snapshot.h — chunk-granular memory snapshots for the CUDA capture library (c/cuda/kc_snapshot.c).
 *
 * A snapshot item (c/common/kc_raw.h kc_item_t) is one live range: an allocation or a module global. The
 * scan kernel (c/cuda/kc_scan.cu, embedded fatbin) computes kc64 (c/common/kc_hash.h) and a non-zero flag of
 * every chunk on the GPU, so:
 *  - before state: only the non-zero chunks are copied to the host and written (memory/before.bin,
 *    packed: runs of chunks at KC_ALIGN-aligned file offsets);
 *  - after state: the scan runs again; only the chunks whose kc64 changed are written
 *    (memory/after.bin, same layout). Nothing is re-read from disk.
 * Copies go through NSLOT pinned buffers on a private stream, overlapped with WRITERS threads that
 * pwrite them, so a dense snapshot runs at the lower of PCIe and disk. Managed and host-mapped
 * ranges (a kernel reading them would migrate or cross PCIe) and any range when the scan kernel
 * cannot be loaded are hashed on the CPU from the staged copy instead (same format).
 * Threads: called with the library's mutex held, on the application thread that launched the
 * captured kernel, after cuCtxSynchronize; the writer threads touch only files and host memory.
 */
#ifndef KC_SNAPSHOT_H
#define KC_SNAPSHOT_H
#include <cuda.h>
#include <pthread.h>
#include "kc_raw.h"

#define KC_NSLOT 4
#define KC_SLOT_BYTES (32u << 20)
#define KC_WRITERS 2

typedef struct {
  int fd;
  uint64_t off;    /* file offset */
  size_t len;
} kc_job_t;

typedef struct {
  /* configuration */
  uint32_t chunk;
  kc_item_t *items;
  size_t nitems;
  /* scan kernel (loaded on first use in the application's context; unloaded by kc_snap_free) */
  CUmodule mod;
  CUfunction scan;
  CUfunction spin; /* kc_spin: hides the launch path from the in-app timing events (NULL if absent) */
  CUdeviceptr dhash, dnz;
  uint64_t dchunks;
  int scan_ok;         /* 1 loaded, -1 unavailable (CPU hashing) */
  char scan_why[256];  /* why unavailable */
  CUstream stream;
  /* copy pipeline */
  char *slot[KC_NSLOT];
  CUevent ev[KC_NSLOT];
  int busy[KC_NSLOT];  /* 1 while a copy or a write owns the slot */
  kc_job_t job[KC_NSLOT];
  int queue[KC_NSLOT], qhead, qlen;
  pthread_t writers[KC_WRITERS];
  int nwriters, stop, werr;
  uint64_t wfail_off;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int nslot_next;
  /* files and figures */
  const char *file[2]; /* memory/before.bin, memory/after.bin unless the caller names others */
  int fd_before, fd_after;
  uint64_t next_off[2];       /* next free offset in before.bin / after.bin */
  uint64_t live_bytes, stored_bytes[2], scanned_bytes;
  double before_us, after_us, scan_us[2], fsync_us;
  int progress_fd;
  double progress_t;
  uint64_t progress_done, progress_total;
  const char *phase;
} kc_snap_t;

/* Set up items (the regions, then the globals) and the pipeline. */
int kc_snap_init(kc_snap_t *s, size_t nitems);

/* Item i of the snapshot: a live range of size bytes at va (kind: raw.json kind; name: a module global's, else NULL). 0, or -1 (KC_FAIL). */
int kc_snap_item(kc_snap_t *s, size_t i, uint64_t va, uint64_t size, const char *kind, const char *name);

/* After the items are set: decide GPU or CPU hashing for each. */
void kc_snap_plan(kc_snap_t *s);

/* Pass `which` (0 before, 1 after): scan, then store what the pass stores. */
int kc_snap_pass(kc_snap_t *s, int which);

/* Flush both memory files to disk (a capture folder is complete only when its data is). */
int kc_snap_sync(kc_snap_t *s);

/* Put the device memory back to the state of pass 0 (s->file[0]): every chunk whose kc64 differs
 * now is rewritten from the file (or zeroed), then everything is scanned again and must match.
 * Used after kerncap ran graph nodes itself in the application's context (c/cuda/kc_graphs.c).
 * Returns 0, or -1 when the memory could not be put back exactly (then said in error.txt). */
int kc_snap_restore(kc_snap_t *s);

/* Release everything the snapshot holds (the scan module, buffers, files); s is reusable. */
void kc_snap_free(kc_snap_t *s);
#endif
