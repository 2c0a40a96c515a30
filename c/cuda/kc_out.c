/*
 * kc_out.c — what the CUDA capture library writes, below its capture and graph units: the paths
 * of the capture folder being written (KERNCAP_OUT, or KERNCAP_OUT/captures/<n>/ when several are
 * taken), the census kernels.<pid>.json with its CUDA parts (CUPTI sharing: c/cuda/kc_cupti.c;
 * executable graphs: kc.graphs, filled by c/cuda/kc_graphs.c), and the driver-call check.
 * Exports nothing outside the library. Reads no environment variable. Called with kc.mu held.
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include "kc_json.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

CUresult kc_cu_check(CUresult r, const char *call, const char *file, int line) {
  if (r != CUDA_SUCCESS) {
    const char *s = "unknown";
    if (kc.cu.cuGetErrorString) kc.cu.cuGetErrorString(r, &s);
    kc_fail_at(file, line, "%s failed: %s (%d)", call, s, (int)r);
  }
  return r;
}

const char *kc_capture_dir(void) { return kc.capdir[0] ? kc.capdir : kc.base.out; }

void kc_path_join(char *dst, size_t n, const char *rel) { snprintf(dst, n, "%s/%s", kc_capture_dir(), rel); }

int kc_open_out(const char *rel, int *fd) {
  char p[4200];
  kc_path_join(p, sizeof p, rel);
  *fd = open(p, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (*fd < 0) { KC_FAIL("cannot create %s: %s", p, strerror(errno)); return -1; }
  return 0;
}

int kc_open_capture_folder(void) {
  if (!kc_several()) return 0;
  return kc_raw_capture_dir(kc.base.out, kc.match.ncaptures, kc.capdir, sizeof kc.capdir);
}

const char *kc_demangled(const char *name) {
  kc_kstat_t *k = kc_census_get(&kc.census, name);
  return k ? kc_census_demangled(&kc.census, k) : name;
}

/* The census's CUDA parts: ,"cupti":{…},"nvtx":{…},"graphs":[…],"graph_target":{…} */
static void census_extra(FILE *f) {
  if (kc_nvtx_filtering() || kc_nvtx_summarizing()) {
    fprintf(f, ",\"nvtx\":{\"injected\":%s,\"filtered_out\":%llu", kc_nvtx_injected() ? "true" : "false", (unsigned long long)kc_nvtx_filtered_out());
    if (kc_nvtx_summarizing()) kc_nvtx_ranges_json(f);
    fputs("}", f);
  }
  fputs(",\"cupti\":", f);
  kc_cupti_json(f);
  fputs(",\"graphs\":[", f);
  for (size_t i = 0; i < kc.graphs.list.n; i++)
    fprintf(f, "%s{\"id\":%u,\"nodes\":%llu,\"kernel_nodes\":%zu,\"launches\":%llu}", i ? "," : "", kc.graphs.list.v[i].id,
            (unsigned long long)kc.graphs.list.v[i].nodes, kc.graphs.list.v[i].k.n, (unsigned long long)kc.graphs.list.v[i].launches);
  fputs("]", f);
  if (kc.graphs.target_in_graph) {
    fprintf(f, ",\"graph_target\":{\"graph\":%u,\"kernel_node\":%llu,\"name\":", kc.graphs.target_graph, (unsigned long long)kc.graphs.target_node);
    kc_json_str(f, kc.graphs.target_name);
    fputs(",\"why\":", f);
    kc_json_str(f, kc.graphs.target_why);
    fputs("}", f);
  }
}

/* Write kernels.<pid>.json, this process's census: who it is, every kernel seen with its count
 * and last launch shape, CUPTI sharing, graphs. final: written at exit (else a periodic or
 * post-capture snapshot of the counts: a process that ends with _exit, e.g. a fork-started Python
 * worker, leaves the last one). */
void kc_write_census(int final) {
  double now = kc_coarse_s();
  __atomic_store(&kc.census_t, &now, __ATOMIC_RELAXED); /* the launch path reads it without kc.mu, on the same clock */
  kc_census_doc_t d = {.final = final, .mode = kc.set.mode, .counting_off = kc.counting_off, .proc = &kc.proc,
                       .visible_vars = KC_VISIBLE_VARS, .extra = census_extra};
  kc_census_write(&kc.census, kc.base.out, &d);
}
