/*
 * kc_process.c — numbering, selection, the capture claim and the identity of a process of a job
 * (the rules: c/common/kc_process.h). Exports nothing outside the library. Reads RANK, LOCAL_RANK,
 * OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID (the rank), the launcher variables of KC_JOB_VARS
 * (recorded only), KERNCAP_RANK and KERNCAP_PROCESS. Called once at the library's set-up
 * (kc_proc_init), then with the library's mutex held.
 */
#define _GNU_SOURCE
#include "kc_process.h"
#include "kc_json.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rank variables in the order they are asked (the first whole number wins). */
static const char *const KC_RANK_VARS[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
/* Every launcher variable recorded in the identity (ranks, sizes, job ids), when set. */
static const char *const KC_JOB_VARS[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID", NULL};



/* A whole decimal number >= 0 (no sign, no trailing text). */
static int kc_whole(const char *s, long *v) {
  if (!s || !*s) return 0;
  char *end = NULL;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (errno || *end || x < 0 || s[0] == '-' || s[0] == '+' || s[0] == ' ') return 0;
  *v = x;
  return 1;
}

/* The process's rank from the environment (KC_RANK_VARS order); -1 and *var = NULL when none. */
static long kc_rank_from_env(const char **var) {
  *var = NULL;
  for (const char *const *n = KC_RANK_VARS; *n; n++) {
    long v;
    if (kc_whole(getenv(*n), &v)) { *var = *n; return v; }
  }
  return -1;
}

/* Number this process: the first n for which out/processes/<n> is created with O_EXCL; the file
 * holds the pid. Returns n, or -1 (errno set) when the folder cannot be written. */
static long kc_proc_number(const char *out, int pid) {
  char p[4200];
  snprintf(p, sizeof p, "%s/processes", out);
  if (mkdir(p, 0755) && errno != EEXIST) return -1;
  for (long n = 0; n < 1000000; n++) {
    snprintf(p, sizeof p, "%s/processes/%ld", out, n);
    int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return -1;
    }
    char b[32];
    int l = snprintf(b, sizeof b, "%d\n", pid);
    if (write(fd, b, (size_t)l) != l) { /* the number is taken all the same */ }
    close(fd);
    return n;
  }
  errno = ENOSPC;
  return -1;
}

/* Set up *P for this process: identity, number, selection from KERNCAP_RANK / KERNCAP_PROCESS.
 * Returns 0, or -1 with err filled (a malformed selection value; P is then not admitted). */
int kc_proc_init(kc_proc_t *P, const char *out, char *err, size_t errn) {
  memset(P, 0, sizeof *P);
  snprintf(P->out, sizeof P->out, "%s", out);
  P->pid = (int)getpid();
  P->ppid = (int)getppid();
  P->rank = kc_rank_from_env(&P->rank_var);
  P->number = kc_proc_number(out, P->pid);
  P->admitted = 1;
  const char *r = getenv("KERNCAP_RANK"), *n = getenv("KERNCAP_PROCESS");
  if (r && *r) {
    P->select = KC_SELECT_RANK;
    if (!kc_whole(r, &P->want)) { P->admitted = 0; snprintf(err, errn, "KERNCAP_RANK is not a whole number: %s", r); return -1; }
    if (P->rank != P->want) {
      P->admitted = 0;
      if (P->rank < 0) snprintf(P->why, sizeof P->why, "--rank %ld: this process has no rank variable", P->want);
      else snprintf(P->why, sizeof P->why, "--rank %ld: this process is rank %ld (%s)", P->want, P->rank, P->rank_var);
    }
  } else if (n && *n) {
    P->select = KC_SELECT_PROCESS;
    if (!kc_whole(n, &P->want)) { P->admitted = 0; snprintf(err, errn, "KERNCAP_PROCESS is not a whole number: %s", n); return -1; }
    if (P->number != P->want) {
      P->admitted = 0;
      snprintf(P->why, sizeof P->why, "--process %ld: this is process %ld of the job", P->want, P->number);
    }
  }
  return 0;
}

/* Try to become the one capturing process: create out/claim with O_EXCL and write who we are.
 * Returns 1 (this process captures), 0 (another process already claimed), -1 (errno: cannot
 * create it). A forked child of an initialized process claims as itself (getpid()). */
int kc_claim(const kc_proc_t *P) {
  char p[4200];
  snprintf(p, sizeof p, "%s/claim", P->out);
  int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return errno == EEXIST ? 0 : -1;
  char b[128];
  int l = snprintf(b, sizeof b, "{\"pid\":%d,\"number\":%ld,\"rank\":%ld}\n", (int)getpid(), P->number, P->rank);
  if (write(fd, b, (size_t)l) != l) { /* the claim is the file's existence; its text is for reports */ }
  close(fd);
  return 1;
}

/* out/<stem>.<pid>.<ext>: a per-process file name (the pid of the caller, fork-safe). */
void kc_proc_file(const char *out, char *dst, size_t n, const char *stem, const char *ext) {
  snprintf(dst, n, "%s/%s.%d.%s", out, stem, (int)getpid(), ext);
}

/* True in a child forked after initialization: the parent's tables are not this process's. */
int kc_proc_forked(const kc_proc_t *P) { return P->pid && P->pid != (int)getpid(); }

/* The command line from /proc/self/cmdline as a JSON array of strings (at most 64 KiB read). */
static void kc_json_cmdline(FILE *f) {
  fputc('[', f);
  FILE *c = fopen("/proc/self/cmdline", "rb");
  if (c) {
    static char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, c);
    fclose(c);
    buf[len] = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
      if (i) fputc(',', f);
      kc_json_str(f, buf + i);
    }
  }
  fputc(']', f);
}

/* Write the process identity as one JSON object: pid, ppid, number, hostname, cmdline, job
 * variables found, rank (and its variable), the selection, the device-visibility variables named
 * in visible_vars (those set), and, when known (non-NULL), the device UUID and PCI bus id. */
void kc_proc_json(FILE *f, const kc_proc_t *P, const char *const *visible_vars, const char *uuid, const char *pci_bus_id) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  fprintf(f, "{\"pid\":%d,\"ppid\":%d,\"number\":%ld,\"hostname\":", (int)getpid(), (int)getppid(), P->number);
  kc_json_str(f, host);
  fputs(",\"cmdline\":", f);
  kc_json_cmdline(f);
  fputs(",\"job_env\":{", f);
  int first = 1;
  for (const char *const *v = KC_JOB_VARS; *v; v++) {
    const char *x = getenv(*v);
    if (!x) continue;
    fprintf(f, "%s\"%s\":", first ? "" : ",", *v);
    kc_json_str(f, x);
    first = 0;
  }
  fputs("},\"rank\":", f);
  if (P->rank >= 0) fprintf(f, "%ld,\"rank_variable\":\"%s\"", P->rank, P->rank_var);
  else fputs("null,\"rank_variable\":null", f);
  static const char *const by[] = {"any", "rank", "process"};
  fprintf(f, ",\"selection\":{\"by\":\"%s\"", by[P->select]);
  if (P->select != KC_SELECT_ANY) fprintf(f, ",\"value\":%ld", P->want);
  fprintf(f, ",\"admitted\":%s},\"visible_devices\":{", P->admitted ? "true" : "false");
  first = 1;
  for (const char *const *v = visible_vars; v && *v; v++) {
    const char *x = getenv(*v);
    if (!x) continue;
    fprintf(f, "%s\"%s\":", first ? "" : ",", *v);
    kc_json_str(f, x);
    first = 0;
  }
  fputc('}', f);
  if (uuid) { fputs(",\"device_uuid\":", f); kc_json_str(f, uuid); }
  if (pci_bus_id) { fputs(",\"pci_bus_id\":", f); kc_json_str(f, pci_bus_id); }
  fputc('}', f);
}

/* 16 UUID bytes as nvidia-smi prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
void kc_uuid_str(const unsigned char b[16], char out[41]) {
  int o = snprintf(out, 41, "GPU-");
  for (int i = 0; i < 16; i++) {
    o += snprintf(out + o, (size_t)(41 - o), "%02x", b[i]);
    if (i == 3 || i == 5 || i == 7 || i == 9) out[o++] = '-', out[o] = 0;
  }
}
