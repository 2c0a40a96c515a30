/*
 * kc_census.c — the launch census of both capture libraries (contract in c/common/kc_census.h).
 * Exports nothing outside the library. Reads no environment variable. Called under the library's
 * mutex, from whichever application thread launched.
 */
#define _GNU_SOURCE
#include "kc_census.h"
#include "kc_json.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define KC_KSTAT_BLOCK 256

kc_demangle_fn kc_find_demangler(void) {
  kc_demangle_fn f = (kc_demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
  if (f) return f;
  void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  return cxx ? (kc_demangle_fn)dlsym(cxx, "__cxa_demangle") : NULL;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static int grow(kc_census_t *c) {
  size_t n = c->cap ? c->cap * 2 : 1024;
  kc_kstat_t **t = calloc(n, sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < c->cap; i++) {
    if (!c->slot[i]) continue;
    size_t j = hash_str(c->slot[i]->name) & (n - 1);
    while (t[j]) j = (j + 1) & (n - 1);
    t[j] = c->slot[i];
  }
  free(c->slot);
  c->slot = t;
  c->cap = n;
  return 0;
}

kc_kstat_t *kc_census_get(kc_census_t *c, const char *name) {
  if (c->order.n * 2 >= c->cap && grow(c)) return NULL;
  size_t j = hash_str(name) & (c->cap - 1);
  while (c->slot[j]) {
    if (!strcmp(c->slot[j]->name, name)) return c->slot[j];
    j = (j + 1) & (c->cap - 1);
  }
  if (!c->block_left) {
    c->block = calloc(KC_KSTAT_BLOCK, sizeof *c->block);
    if (!c->block) return NULL;
    c->block_left = KC_KSTAT_BLOCK;
  }
  kc_kstat_t *k = c->block;
  k->name = strdup(name);
  if (!k->name || KC_VEC_PUSH(c->order, k)) { free(k->name); k->name = NULL; return NULL; }
  c->block++;
  c->block_left--;
  c->slot[j] = k;
  return k;
}

const char *kc_census_demangled(kc_census_t *c, kc_kstat_t *k) {
  if (k->demangled) return k->demangled;
  const char *name = k->name;
  if (c->demangle && name[0] == '_' && name[1] == 'Z') {
    int st = 0;
    char *d = c->demangle(name, NULL, NULL, &st);
    if (st == 0 && d) k->demangled = d;
    else free(d);
  }
  if (!k->demangled) k->demangled = strdup(name);
  return k->demangled ? k->demangled : name;
}

void kc_census_write(kc_census_t *c, const char *out, const kc_census_doc_t *d) {
  if (!out || !out[0] || kc_proc_forked(d->proc)) return; /* a forked child holds its parent's tables */
  char p[4200], t[4300];
  kc_proc_file(out, p, sizeof p, "kernels", "json");
  snprintf(t, sizeof t, "%s.part", p);
  FILE *f = fopen(t, "w");
  if (!f) return;
  fprintf(f, "{\"final\":%s,\"mode\":", d->final ? "true" : "false");
  kc_json_str(f, d->mode ? d->mode : "");
  fputs(",\"counting\":", f);
  if (d->counting_off) kc_json_str(f, d->counting_off);
  else fputs("true", f);
  fputs(",\"process\":", f);
  kc_proc_json(f, d->proc, d->visible_vars, NULL, NULL);
  fprintf(f, ",\"launches\":%llu,\"kernels\":[", (unsigned long long)kc_census_read(&c->launches));
  for (size_t i = 0; i < c->order.n; i++) {
    kc_kstat_t *k = c->order.v[i];
    fprintf(f, "%s\n{\"name\":", i ? "," : "");
    kc_json_str(f, k->name);
    fputs(",\"demangled\":", f);
    kc_json_str(f, kc_census_demangled(c, k));
    fprintf(f, ",\"count\":%llu,\"benchmark\":%llu,\"graph\":%llu,\"recorded\":%llu,\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"module\":\"",
            (unsigned long long)kc_census_read(&k->count), (unsigned long long)kc_census_read(&k->benchmark),
            (unsigned long long)kc_census_read(&k->graph), (unsigned long long)kc_census_read(&k->recorded),
            __atomic_load_n(&k->grid[0], __ATOMIC_RELAXED), __atomic_load_n(&k->grid[1], __ATOMIC_RELAXED),
            __atomic_load_n(&k->grid[2], __ATOMIC_RELAXED), __atomic_load_n(&k->block[0], __ATOMIC_RELAXED),
            __atomic_load_n(&k->block[1], __ATOMIC_RELAXED), __atomic_load_n(&k->block[2], __ATOMIC_RELAXED));
    fprintf(f, c->module_fmt ? c->module_fmt : "%lld", (long long)k->module);
    fputs("\"}", f);
  }
  fputs("\n]", f);
  if (d->extra) d->extra(f);
  fputs("}\n", f);
  fclose(f);
  rename(t, p);
}
