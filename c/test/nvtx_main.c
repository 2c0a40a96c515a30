/* The NVTX range selection of the CUDA capture library without CUDA (c/cuda/kc_nvtx.c and
 * kc_nvtx_filter.c, built with plain gcc against NVTX 3's headers). NVTX 3 loads the injection
 * statically here (the weak InitializeInjectionNvtx2_fnptr its loader looks for), so the calls below
 * are real NVTX calls that reach kerncap's table.
 *   nvtx_main parse EXPR…     one line per EXPR: "ok CANONICAL" or "error MESSAGE"
 *   nvtx_main run EVENT…      with KERNCAP_NVTX_INCLUDE/EXCLUDE set; one line per "launch": 1 passes, 0 not;
 *                             with KERNCAP_NVTX_SUMMARY=1 a last line: {"summary":true,"ranges":[…],…}
 * EVENTs: push:NAME, push:DOMAIN@NAME (nvtxDomainRangePushEx), pushw:NAME (wide), pushreg:DOMAIN@NAME
 * (a registered string), pop, pop:DOMAIN, start:NAME, start:DOMAIN@NAME, end:N (the Nth start,
 * 1-based), launch, note:KERNEL (a launch of KERNEL counted as the library counts it). test/cpu/nvtx.test.ts runs its table through this and through src/capture/nvtx.ts. */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include "../cuda/kc_nvtx.h"

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = InitializeInjectionNvtx2;

static struct { char name[128]; nvtxDomainHandle_t h; } domains[16];
static int ndomains;

static nvtxDomainHandle_t domain(const char *name) {
  for (int i = 0; i < ndomains; i++)
    if (!strcmp(domains[i].name, name)) return domains[i].h;
  if (ndomains == 16) return NULL;
  snprintf(domains[ndomains].name, sizeof domains[ndomains].name, "%s", name);
  return domains[ndomains++].h = nvtxDomainCreateA(name);
}

/* "DOMAIN@NAME" → domain handle (NULL: default) and *name */
static nvtxDomainHandle_t split(char *arg, const char **name) {
  char *at = strchr(arg, '@');
  if (!at) { *name = arg; return NULL; }
  *at = 0;
  *name = at + 1;
  return domain(arg);
}

static nvtxEventAttributes_t attr(const char *name) {
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return a;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "parse")) {
    for (int i = 2; i < argc; i++) {
      kc_nvtx_expr_t e;
      char err[1200], out[1200];
      if (kc_nvtx_parse(argv[i], &e, err, sizeof err)) { printf("error %s\n", err); continue; }
      kc_nvtx_expr_format(&e, out, sizeof out);
      printf("ok %s\n", out);
      kc_nvtx_expr_free(&e);
    }
    return 0;
  }
  if (argc < 2 || strcmp(argv[1], "run")) { fprintf(stderr, "usage: nvtx_main parse EXPR… | run EVENT…\n"); return 2; }
  char err[1200];
  if (kc_nvtx_setup(err, sizeof err)) { printf("error %s\n", err); return 1; }
  nvtxRangeId_t ids[64];
  int nids = 0;
  for (int i = 2; i < argc; i++) {
    char *ev = argv[i], *arg = strchr(ev, ':');
    if (arg) *arg++ = 0;
    const char *name = NULL;
    if (!strcmp(ev, "launch")) printf("%d\n", kc_nvtx_launch_passes());
    else if (!strcmp(ev, "note")) { /* a launch of kernel ARG as the library counts one: filter, then the summary */
      if (kc_nvtx_launch_passes()) kc_nvtx_note_launch(arg);
    }
    else if (!strcmp(ev, "push")) {
      nvtxDomainHandle_t d = split(arg, &name);
      if (d) {
        nvtxEventAttributes_t a = attr(name);
        nvtxDomainRangePushEx(d, &a);
      } else nvtxRangePushA(name);
    } else if (!strcmp(ev, "pushw")) {
      wchar_t w[256];
      mbstowcs(w, arg, 255);
      w[255] = 0;
      nvtxRangePushW(w);
    } else if (!strcmp(ev, "pushreg")) {
      nvtxDomainHandle_t d = split(arg, &name);
      nvtxEventAttributes_t a = attr(NULL);
      a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
      a.message.registered = nvtxDomainRegisterStringA(d, name);
      nvtxDomainRangePushEx(d, &a);
    } else if (!strcmp(ev, "pop")) {
      if (arg) nvtxDomainRangePop(domain(arg));
      else nvtxRangePop();
    } else if (!strcmp(ev, "start") && nids < 64) {
      nvtxDomainHandle_t d = split(arg, &name);
      nvtxEventAttributes_t a = attr(name);
      ids[nids++] = d ? nvtxDomainRangeStartEx(d, &a) : nvtxRangeStartA(name);
    } else if (!strcmp(ev, "end")) {
      int n = atoi(arg);
      if (n >= 1 && n <= nids) nvtxRangeEnd(ids[n - 1]);
    } else { fprintf(stderr, "unknown event %s\n", ev); return 2; }
  }
  if (kc_nvtx_summarizing()) {
    fputs("{\"summary\":true", stdout);
    kc_nvtx_ranges_json(stdout);
    fputs("}\n", stdout);
  }
  return 0;
}
