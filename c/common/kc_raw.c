/*
 * kc_raw.c — chunked memory items and the raw.json writer of both capture libraries (contract in
 * c/common/kc_raw.h and docs/raw-capture.md). Exports nothing outside the library. Reads
 * KERNCAP_CHUNK_BYTES. Called with the library's mutex held, on the application thread that made
 * the captured launch or dispatch.
 */
#define _GNU_SOURCE
#include "kc_raw.h"
#include "kc_log.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint32_t kc_chunk_bytes(void) {
  const char *e = getenv("KERNCAP_CHUNK_BYTES");
  unsigned long v = e ? strtoul(e, NULL, 10) : 0;
  if (v >= (64u << 10) && v <= (64u << 20) && !(v & (v - 1))) return (uint32_t)v;
  return KC_CHUNK_DEFAULT;
}

int kc_item_init(kc_item_t *it, uint64_t va, uint64_t size, const char *kind, const char *name, uint32_t chunk) {
  memset(it, 0, sizeof *it);
  it->va = va;
  it->size = size;
  it->kind = kind;
  it->name = name;
  it->nchunks = (size + chunk - 1) / chunk;
  size_t n = it->nchunks ? it->nchunks : 1;
  it->hb = calloc(n, 8);
  it->ha = calloc(n, 8);
  it->zb = calloc(n, 1);
  it->za = calloc(n, 1);
  if (!it->hb || !it->ha || !it->zb || !it->za) { KC_FAIL("out of host memory for the snapshot"); return -1; }
  return 0;
}

void kc_item_free(kc_item_t *it) {
  free(it->hb); free(it->ha); free(it->zb); free(it->za);
  KC_VEC_FREE(it->before.x); KC_VEC_FREE(it->before.hash);
  KC_VEC_FREE(it->after.x); KC_VEC_FREE(it->after.hash);
}

uint64_t kc_chunk_len(const kc_item_t *it, uint32_t chunk, uint64_t c) {
  uint64_t start = c * chunk;
  return it->size - start < chunk ? it->size - start : chunk;
}

uint64_t kc_align_up(uint64_t x) { return (x + KC_ALIGN - 1) / KC_ALIGN * KC_ALIGN; }

int kc_stored_push(kc_stored_t *st, uint64_t chunk_index, uint64_t h, uint64_t file_off, uint32_t chunk) {
  kc_extent_t *last = st->x.n ? &st->x.v[st->x.n - 1] : NULL;
  if (!(last && last->first + last->count == chunk_index && last->offset + last->count * chunk == file_off) &&
      KC_VEC_PUSH(st->x, (kc_extent_t){chunk_index, 0, file_off}))
    return -1;
  st->x.v[st->x.n - 1].count++;
  return KC_VEC_PUSH(st->hash, h);
}

void kc_item_count_changes(kc_item_t *it, uint32_t chunk) {
  for (size_t x = 0; x < it->after.x.n; x++) {
    const kc_extent_t *e = &it->after.x.v[x];
    it->changed_chunks += e->count;
    for (uint64_t c = e->first; c < e->first + e->count; c++) it->changed_bytes += kc_chunk_len(it, chunk, c);
  }
}

int kc_item_cpu_pass(kc_item_t *it, const kc_cpu_pass_t *p) {
  for (uint64_t c = 0; c < it->nchunks; c++) {
    uint64_t len = kc_chunk_len(it, p->chunk, c);
    if (p->read(p->ud, it->va + c * p->chunk, p->buf, len)) return -1;
    int nz = 0;
    uint64_t h = kc_hash64(p->buf, len, &nz);
    (p->which ? it->ha : it->hb)[c] = h;
    (p->which ? it->za : it->zb)[c] = (uint8_t)nz;
    if (!kc_item_stores(it, p->which, c)) continue;
    uint64_t off = *p->next_off;
    if (kc_stored_push(p->which ? &it->after : &it->before, c, h, off, p->chunk)) { KC_FAIL("out of host memory"); return -1; }
    for (uint64_t done = 0; done < len;) {
      ssize_t w = pwrite(p->fd, p->buf + done, len - done, (off_t)(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) { *p->werr = w < 0 ? errno : ENOSPC; *p->wfail_off = off; return -1; }
      done += (uint64_t)w;
    }
    /* consecutive chunks stay one extent: the next one goes right after this one */
    *p->next_off = len == p->chunk ? off + len : kc_align_up(off + len);
    *p->stored_bytes += len;
    if (p->progress) *p->progress += len;
  }
  /* the next extent (another item) starts aligned */
  *p->next_off = kc_align_up(*p->next_off);
  return 0;
}

/* One stored state as {"extents":[[first,count,offset],...],"hashes":"<16 hex each>"}. */
static void kc_json_stored(FILE *f, const kc_stored_t *st) {
  fprintf(f, "{\"extents\":[");
  for (size_t x = 0; x < st->x.n; x++)
    fprintf(f, "%s[%llu,%llu,%llu]", x ? "," : "", (unsigned long long)st->x.v[x].first, (unsigned long long)st->x.v[x].count,
            (unsigned long long)st->x.v[x].offset);
  fprintf(f, "],\"hashes\":\"");
  for (size_t h = 0; h < st->hash.n; h++) fprintf(f, "%016llx", (unsigned long long)st->hash.v[h]);
  fprintf(f, "\"}");
}

/* One item (region or global). */
static void kc_json_item(FILE *f, const kc_item_t *it) {
  fprintf(f, "{");
  if (it->name) {
    fprintf(f, "\"name\":");
    kc_json_str(f, it->name);
    fprintf(f, ",");
  }
  fprintf(f, "\"va\":\"0x%llx\",\"size\":%llu,\"kind\":\"%s\",\"hashed_on\":\"%s\",\"changed\":%s,\"changed_chunks\":%llu,\"changed_bytes\":%llu,\"before\":",
          (unsigned long long)it->va, (unsigned long long)it->size, it->kind, it->gpu ? "gpu" : "cpu", it->after.x.n ? "true" : "false",
          (unsigned long long)it->changed_chunks, (unsigned long long)it->changed_bytes);
  kc_json_stored(f, &it->before);
  fprintf(f, ",\"after\":");
  kc_json_stored(f, &it->after);
  fprintf(f, "}");
}

static void kc_json_items(kc_json *w, const char *key, const kc_item_t *items, size_t n) {
  kc_json_key(w, key);
  kc_json_begin_array(w);
  for (size_t i = 0; i < n; i++) {
    FILE *o = kc_json_value(w);
    fputc('\n', o);
    kc_json_item(o, &items[i]);
  }
  kc_json_end_array(w);
}

int kc_raw_write(const char *dir, const kc_raw_t *r) {
  char p[4200], t[4300];
  snprintf(p, sizeof p, "%s/raw.json", dir);
  snprintf(t, sizeof t, "%s.part", p);
  FILE *f = fopen(t, "w");
  if (!f) { KC_FAIL("cannot write %s: %s", t, strerror(errno)); return -1; }
  kc_json j, *w = &j; /* the keys are the raw_version 2 schema (src/capture/raw.ts) */
  kc_json_init(w, f);
  kc_json_begin_object(w);
  kc_json_ku64(w, "raw_version", KC_RAW_VERSION);
  kc_json_kstr(w, "library", r->library);
  kc_json_kstr(w, "frontend", r->frontend);
  kc_json_key(w, "kernel");
  kc_json_begin_object(w);
  kc_json_kstr(w, "name", r->name);
  kc_json_kstr(w, "demangled", r->demangled);
  kc_json_ki64(w, "match_index", r->match_index);
  kc_json_ku64(w, "launch_index", r->launch_index);
  if (r->counts_benchmarks >= 0) kc_json_kbool(w, "counts_benchmarks", r->counts_benchmarks);
  kc_json_end_object(w);
  kc_json_key(w, "device");
  kc_json_begin_object(w);
  kc_json_kstr(w, "vendor", r->vendor);
  kc_json_kstr(w, "name", r->device_name);
  kc_json_kstr(w, "arch", r->arch);
  kc_json_ki64(w, "driver_version", r->driver_version);
  kc_json_ki64(w, "ordinal", r->ordinal);
  kc_json_end_object(w);
  kc_json_key(w, "process");
  kc_proc_json(kc_json_value(w), r->proc, r->visible_vars, r->device_uuid, r->pci_bus_id);
  if (r->has_target) kc_json_ki64(w, "target", r->target);
  if (r->has_graph) {
    kc_json_key(w, "graph");
    kc_json_begin_object(w);
    kc_json_ki64(w, "id", r->graph_id);
    kc_json_ku64(w, "kernel_node", r->graph_node);
    kc_json_end_object(w);
  }
  kc_json_key(w, "launch");
  kc_json_begin_object(w);
  kc_json_kstr(w, "api", r->api);
  kc_json_kdim3(w, "grid", r->grid[0], r->grid[1], r->grid[2]);
  kc_json_kdim3(w, "block", r->block[0], r->block[1], r->block[2]);
  kc_json_ku64(w, "shared_mem_bytes", r->shared_mem_bytes);
  kc_json_key(w, "attributes");
  kc_json_begin_array(w);
  for (size_t i = 0; i < r->nattrs; i++) {
    kc_json_begin_object(w);
    kc_json_ki64(w, "id", r->attrs[i].id);
    kc_json_kstr(w, "name", r->attrs[i].name);
    kc_json_key(w, "value_hex");
    kc_json_hexbytes(w, r->attrs[i].value, r->attrs[i].value_size);
    kc_json_end_object(w);
  }
  kc_json_end_array(w);
  kc_json_kdim3(w, "cluster", r->cluster[0], r->cluster[1], r->cluster[2]);
  kc_json_end_object(w);
  kc_json_key(w, "function_attributes");
  kc_json_begin_array(w);
  for (size_t i = 0; i < r->nfunc_attrs; i++) {
    kc_json_begin_object(w);
    kc_json_ki64(w, "id", r->func_attrs[i].id);
    kc_json_kstr(w, "name", r->func_attrs[i].name);
    kc_json_ki64(w, "value", r->func_attrs[i].value);
    kc_json_end_object(w);
  }
  kc_json_end_array(w);
  kc_json_key(w, "params");
  kc_json_begin_object(w);
  kc_json_kstr(w, "file", r->params_file);
  kc_json_ku64(w, "size", r->params_size);
  kc_json_kstr(w, "layout_source", r->layout_source);
  kc_json_key(w, "layout");
  kc_json_begin_array(w);
  for (size_t i = 0; i < r->nparams; i++) {
    kc_json_begin_object(w);
    kc_json_ku64(w, "index", i);
    kc_json_ku64(w, "offset", r->param_offset[i]);
    kc_json_ku64(w, "size", r->param_size[i]);
    kc_json_end_object(w);
  }
  kc_json_end_array(w);
  kc_json_end_object(w);
  kc_json_key(w, "module");
  if (r->module_file) {
    kc_json_begin_object(w);
    kc_json_kstr(w, "file", r->module_file);
    kc_json_kstr(w, "kind", r->module_kind);
    kc_json_ku64(w, "size", r->module_size);
    if (r->has_module_id) kc_json_ku64(w, "id", r->module_id);
    kc_json_kstr(w, "source", r->module_source);
    kc_json_end_object(w);
  } else kc_json_null(w);
  kc_json_key(w, "memory");
  kc_json_begin_object(w);
  kc_json_ku64(w, "chunk_bytes", r->chunk);
  kc_json_kstr(w, "hash", KC_HASH_NAME);
  kc_json_ku64(w, "align", KC_ALIGN);
  kc_json_ku64(w, "live_bytes", r->live_bytes);
  kc_json_ku64(w, "stored_before_bytes", r->stored_before_bytes);
  kc_json_ku64(w, "stored_after_bytes", r->stored_after_bytes);
  kc_json_kbool(w, "hashed_on_gpu", r->hashed_on_gpu);
  kc_json_key(w, "gpu_scan_unavailable");
  if (r->hashed_on_gpu) kc_json_null(w);
  else kc_json_string(w, r->gpu_scan_unavailable ? r->gpu_scan_unavailable : "");
  kc_json_end_object(w);
  kc_json_items(w, "regions", r->items, r->nregions);
  kc_json_items(w, "globals", r->items + r->nregions, r->nglobals);
  if (r->has_fault) {
    kc_json_key(w, "fault");
    kc_json_begin_object(w);
    kc_json_ki64(w, "code", r->fault_code);
    kc_json_kstr(w, "name", r->fault_name);
    kc_json_kstr(w, "message", r->fault_message);
    kc_json_end_object(w);
  }
  if (r->app_launch_method) kc_json_kstr(w, "app_launch_method", r->app_launch_method);
  if (r->has_globals_scan) {
    kc_json_key(w, "globals_scan");
    kc_json_begin_object(w);
    kc_json_ki64(w, "symbols", r->globals_symbols);
    kc_json_ku64(w, "globals", r->nglobals);
    kc_json_ki64(w, "unreadable_entries", r->globals_unreadable);
    kc_json_end_object(w);
  }
  kc_json_key(w, "timing");
  kc_json_begin_object(w);
  for (size_t i = 0; i < r->ntiming; i++) kc_json_kdouble(w, r->timing[i].key, r->timing[i].fmt, r->timing[i].value);
  kc_json_end_object(w);
  kc_json_key(w, "hsa");
  if (r->has_hsa) {
    kc_json_begin_object(w);
    kc_json_khex(w, "kernel_object", r->hsa_kernel_object);
    kc_json_ku64(w, "group_segment_size", r->hsa_group_segment_size);
    kc_json_ku64(w, "private_segment_size", r->hsa_private_segment_size);
    kc_json_khex(w, "kernarg_address", r->hsa_kernarg_address);
    kc_json_ku64(w, "runtime_version", r->hsa_runtime_version);
    kc_json_end_object(w);
  } else kc_json_null(w);
  kc_json_end_object(w);
  fputc('\n', f);
  int bad = ferror(f);
  if (fclose(f) || bad) { KC_FAIL("cannot write %s: %s", t, strerror(errno)); return -1; }
  if (rename(t, p)) { KC_FAIL("cannot rename %s: %s", t, strerror(errno)); return -1; }
  return 0;
}

int kc_raw_capture_dir(const char *out, int n, char *dst, size_t dn) {
  if (strlen(out) + 32 > dn) { KC_FAIL("KERNCAP_OUT is too long for several captures"); return -1; }
  char p[4300];
  snprintf(p, sizeof p, "%s/captures", out);
  mkdir(p, 0755);
  snprintf(dst, dn, "%s/captures/%d", out, n);
  const char *sub[] = {"", "/kernel", "/memory"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", dst, sub[i]);
    if (mkdir(p, 0755) && errno != EEXIST) { KC_FAIL("cannot create %s: %s", p, strerror(errno)); return -1; }
  }
  return 0;
}
