/*
 * kc_process.h — which process of a multi-process job captures, and who it is (c/common/kc_process.c).
 * Shared by the CUDA and the HSA capture libraries (no CUDA/HSA types here, so
 * c/test/process_main.c tests it with plain gcc).
 *
 * A job (torchrun, multiprocessing spawn/fork, a Python parent with a CUDA subprocess, srun-like
 * wrappers) runs the library in every process that initializes CUDA/HSA, all writing into the one
 * KERNCAP_OUT folder (the environment is inherited). So:
 *  - every process is numbered at initialization: the first n for which
 *    KERNCAP_OUT/processes/<n> can be created with O_EXCL (0-based, atomic on any POSIX file
 *    system, NFS included); the file holds the pid;
 *  - selection: KERNCAP_RANK=N admits only a process whose rank is N, the rank being the first
 *    of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID that is set to a whole
 *    number (RANK first: torchrun, accelerate and DeepSpeed set it and the application's own
 *    code uses it; SLURM_PROCID last: an outer srun task's id is inherited by every worker the
 *    task starts). KERNCAP_PROCESS=N admits only process number N. Neither: every process is
 *    admitted. A process that is not admitted only counts launches;
 *  - exactly one process captures: at its matching launch an admitted process creates
 *    KERNCAP_OUT/claim with O_EXCL; whoever creates it captures, every other process only counts
 *    from then on (a Python parent and its subprocess share RANK, so selection alone is not enough);
 *  - per-process files (kernels.<pid>.json, error.<pid>.txt) so that nothing a second process
 *    writes mixes into another's; the capture's own files are written only by the claimer.
 */
#ifndef KC_PROCESS_H
#define KC_PROCESS_H
#include <stddef.h>
#include <stdio.h>

typedef enum { KC_SELECT_ANY = 0, KC_SELECT_RANK, KC_SELECT_PROCESS } kc_select_t;

typedef struct {
  char out[4096];
  int pid, ppid;
  long number;          /* 0-based order of initialization in the job; -1 when it could not be taken */
  long rank;            /* -1 when no rank variable holds a whole number */
  const char *rank_var; /* the variable rank came from, or NULL */
  kc_select_t select;
  long want;            /* KERNCAP_RANK / KERNCAP_PROCESS value */
  int admitted;         /* 1: may claim the capture; 0: only counts */
  char why[256];        /* why not admitted (for the log) */
} kc_proc_t;

/* Set up *P for this process: identity, number, selection from KERNCAP_RANK / KERNCAP_PROCESS.
 * Returns 0, or -1 with err filled (a malformed selection value; P is then not admitted). */
int kc_proc_init(kc_proc_t *P, const char *out, char *err, size_t errn);

/* Try to become the one capturing process: create out/claim with O_EXCL and write who we are.
 * Returns 1 (this process captures), 0 (another process already claimed), -1 (errno: cannot
 * create it). A forked child of an initialized process claims as itself (getpid()). */
int kc_claim(const kc_proc_t *P);

/* out/<stem>.<pid>.<ext>: a per-process file name (the pid of the caller, fork-safe). */
void kc_proc_file(const char *out, char *dst, size_t n, const char *stem, const char *ext);

/* True in a child forked after initialization: the parent's tables are not this process's. */
int kc_proc_forked(const kc_proc_t *P);

/* Write the process identity as one JSON object: pid, ppid, number, hostname, cmdline, job
 * variables found, rank (and its variable), the selection, the device-visibility variables named
 * in visible_vars (those set), and, when known (non-NULL), the device UUID and PCI bus id. */
void kc_proc_json(FILE *f, const kc_proc_t *P, const char *const *visible_vars, const char *uuid, const char *pci_bus_id);

/* 16 UUID bytes as nvidia-smi prints them: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
void kc_uuid_str(const unsigned char b[16], char out[41]);
#endif
