/*
 * kerncap-confine: run a command under a Linux Landlock ruleset, and where the kernel lets an
 * unprivileged process make a user and mount namespace, in a file tree holding only the allowed
 * paths (a confined build's sandbox, src/frontends/sandbox.ts). Bun.spawn has no hook between
 * fork and exec, so kerncap runs the build through this program, which restricts itself and then
 * execs the build.
 *
 * Why both: Landlock refuses to open a file outside (EACCES) but does not hide that it exists (a
 * path that does not exist still fails ENOENT, before Landlock is asked), and gcc's __has_include
 * tells the two apart (EACCES is a fatal error, ENOENT "no such header"): one bit per build. In
 * the namespace's tree a path outside does not exist, whether or not it does outside.
 *
 *   kerncap-confine --probe
 *       prints "abi=N hide=H": the kernel's Landlock ABI version (0: unsupported or disabled), and
 *       whether the namespace tree can be made here (1/0: tried in a child), and exits 0.
 *   kerncap-confine [--hide] [--ro PATH]... [--rw PATH]... -- PROGRAM ARG...
 *       --hide: first make the namespace tree: a user namespace mapping the caller's uid and gid
 *       to themselves, a mount namespace whose root is an empty tmpfs with each --ro path bound
 *       read-only and each --rw path bound writable at its own path (the links on the way to it
 *       made again), the working folder kept; no /proc, /sys or /dev but what is named; and a PID
 *       namespace: PROGRAM runs under a small init (pid 1 of it) that forwards the signals kerncap
 *       sends and reaps orphans, and when PROGRAM ends every process it left (a `setsid cmd &`)
 *       is killed with the namespace, as it is when kerncap-confine itself is killed.
 *       PROGRAM (found on PATH as execvp finds it) may then read and execute files only beneath
 *       the --ro and --rw paths, and write, create, remove and rename only beneath the --rw paths
 *       (a path naming a file grants that file alone); TCP bind and connect are denied (ABI >= 4),
 *       and so are signals and abstract unix sockets leaving the sandbox (ABI >= 6). A path that
 *       does not exist is skipped. Uses the rights of the newest ABI the kernel has (the Landlock
 *       docs' best effort: rights a kernel lacks are neither handled nor granted).
 *
 * Exit codes of its own (else the PROGRAM's): 64 bad usage; 123 --hide and the namespace tree
 * could not be made (its reason on stderr); 121 Landlock unsupported (kernel
 * without it, or disabled: ENOSYS, EOPNOTSUPP) or an ABI below KC_MIN_ABI; 122 the ruleset
 * could not be made or applied (its reason on stderr); 127 PROGRAM could not be executed.
 * Depends on libc only (the Landlock constants are defined here: older headers lack the newer ones).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

#define KC_CREATE_RULESET_VERSION (1U << 0)
#define KC_RULE_PATH_BENEATH 1

/* filesystem rights (LANDLOCK_ACCESS_FS_*) */
#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_REMOVE_DIR (1ULL << 4)
#define FS_REMOVE_FILE (1ULL << 5)
#define FS_MAKE_CHAR (1ULL << 6)
#define FS_MAKE_DIR (1ULL << 7)
#define FS_MAKE_REG (1ULL << 8)
#define FS_MAKE_SOCK (1ULL << 9)
#define FS_MAKE_FIFO (1ULL << 10)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_MAKE_SYM (1ULL << 12)
#define FS_REFER (1ULL << 13)    /* ABI 2 */
#define FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
/* network rights (LANDLOCK_ACCESS_NET_*, ABI 4) */
#define NET_BIND_TCP (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)
/* scopes (LANDLOCK_SCOPE_*, ABI 6) */
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)

/* the lowest ABI used: ABI 1 cannot rename across folders (REFER), which compilers' temp files may need */
#define KC_MIN_ABI 1

#define EXIT_USAGE 64
#define EXIT_UNSUPPORTED 121
#define EXIT_SETUP 122
#define EXIT_HIDE 123
#define EXIT_EXEC 127

struct kc_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct kc_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

/* the rights that apply to a file (a rule on a file may grant only these) */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

static int landlock_abi(void) {
  long v = syscall(__NR_landlock_create_ruleset, NULL, 0, KC_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : (int)v;
}

/* every filesystem right the kernel of this ABI handles */
static uint64_t fs_rights(int abi) {
  uint64_t r = (FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
  if (abi >= 2) r |= FS_REFER;
  if (abi >= 3) r |= FS_TRUNCATE;
  if (abi >= 5) r |= FS_IOCTL_DEV;
  return r;
}

static int add_path(int ruleset, const char *path, uint64_t want, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return 0; /* not on this system: nothing to grant */
    fprintf(stderr, "kerncap-confine: %s: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    fprintf(stderr, "kerncap-confine: %s: %s\n", path, strerror(errno));
    close(fd);
    return -1;
  }
  struct kc_path_beneath_attr pb = {.allowed_access = want & handled, .parent_fd = fd};
  if (!S_ISDIR(st.st_mode)) pb.allowed_access &= FS_FILE_RIGHTS;
  int rc = pb.allowed_access ? (int)syscall(__NR_landlock_add_rule, ruleset, KC_RULE_PATH_BENEATH, &pb, 0) : 0;
  if (rc != 0) fprintf(stderr, "kerncap-confine: adding %s: %s\n", path, strerror(errno));
  close(fd);
  return rc;
}


/* ───────────── the namespace tree (--hide) ───────────── */

#define KC_MAX_ITEMS 256

/* a path bound into the tree (canonical: no link on the way), or a link made again there */
struct kc_item {
  char path[PATH_MAX];
  char target[PATH_MAX]; /* a link's text; empty for a bind */
  int fd;                /* a bind's source, opened O_PATH before the tree hides it */
  int rw;
  int dir;
};

static struct kc_item items[KC_MAX_ITEMS];
static int n_items;

static int fail_errno(const char *what, const char *path) {
  fprintf(stderr, "kerncap-confine: %s %s: %s\n", what, path ? path : "", strerror(errno));
  return -1;
}

/*
 * Plan `path` (absolute): each link on the way made again in the tree, the path it leads to
 * planned in turn, and the canonical path bound. A path that does not exist is skipped.
 */
static int plan(const char *path, int rw, int depth) {
  if (path[0] != '/') {
    fprintf(stderr, "kerncap-confine: %s: not an absolute path\n", path);
    return -1;
  }
  if (depth > 16) {
    fprintf(stderr, "kerncap-confine: %s: too many links\n", path);
    return -1;
  }
  char prefix[PATH_MAX] = "";
  size_t len = 0;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (len + 1 + n >= sizeof prefix) return errno = ENAMETOOLONG, fail_errno("path", path);
    prefix[len++] = '/';
    memcpy(prefix + len, p, n);
    len += n;
    prefix[len] = 0;
    p += n;
    struct stat st;
    if (lstat(prefix, &st) != 0) return errno == ENOENT || errno == ENOTDIR ? 0 : fail_errno("lstat", prefix);
    if (!S_ISLNK(st.st_mode)) continue;
    if (n_items >= KC_MAX_ITEMS) return errno = E2BIG, fail_errno("too many paths at", prefix);
    struct kc_item *it = &items[n_items++];
    memset(it, 0, sizeof *it);
    it->fd = -1;
    snprintf(it->path, sizeof it->path, "%s", prefix);
    ssize_t t = readlink(prefix, it->target, sizeof it->target - 1);
    if (t <= 0) return fail_errno("readlink", prefix);
    it->target[t] = 0;
    /* the path through the link: its target (relative to the link's folder) and the rest */
    char next[PATH_MAX];
    int w;
    if (it->target[0] == '/') w = snprintf(next, sizeof next, "%s%s", it->target, p);
    else {
      char *slash = strrchr(prefix, '/');
      *slash = 0;
      w = snprintf(next, sizeof next, "%s/%s%s", prefix, it->target, p);
    }
    if (w < 0 || (size_t)w >= sizeof next) return errno = ENAMETOOLONG, fail_errno("path", path);
    return plan(next, rw, depth + 1);
  }
  char real[PATH_MAX];
  if (!realpath(path, real)) return errno == ENOENT ? 0 : fail_errno("realpath", path);
  if (n_items >= KC_MAX_ITEMS) return errno = E2BIG, fail_errno("too many paths at", path);
  struct kc_item *it = &items[n_items++];
  memset(it, 0, sizeof *it);
  snprintf(it->path, sizeof it->path, "%s", real);
  it->rw = rw;
  it->fd = open(real, O_PATH | O_CLOEXEC);
  if (it->fd < 0) return fail_errno("open", real);
  struct stat st;
  if (fstat(it->fd, &st) != 0) return fail_errno("stat", real);
  it->dir = S_ISDIR(st.st_mode);
  return 0;
}

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail_errno("open", path);
  ssize_t n = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  if (n != (ssize_t)strlen(text)) return errno = e, fail_errno("write", path);
  return 0;
}

/* a user namespace mapping the caller's ids to themselves, a private mount namespace, a network namespace (no
 * interface but its own loopback, down), and a PID namespace for the children (the first one forked is its pid 1) */
static int enter_namespaces(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID) != 0) return fail_errno("unshare", "(user, mount, network and PID namespace)");
  char map[64];
  if (write_text("/proc/self/setgroups", "deny") != 0) return -1;
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  if (write_text("/proc/self/uid_map", map) != 0) return -1;
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  if (write_text("/proc/self/gid_map", map) != 0) return -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return fail_errno("mount", "/ (private)");
  return 0;
}

/* mkdir -p of `path` (every folder above it made 0755) */
static int make_dirs(char *path, int last) {
  for (char *s = path + 1;; s++) {
    if (*s != '/' && *s) continue;
    char c = *s;
    if (!c && !last) break;
    *s = 0;
    int rc = mkdir(path, 0755);
    *s = c;
    if (rc != 0 && errno != EEXIST) return fail_errno("mkdir", path);
    if (!c) break;
  }
  return 0;
}

static int by_length(const void *a, const void *b) {
  return (int)strlen(((const struct kc_item *)a)->path) - (int)strlen(((const struct kc_item *)b)->path);
}

/* the tree: the planned items under a fresh tmpfs, made the root; the working folder kept */
static int hide(char **args, int n) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return fail_errno("getcwd", NULL);
  if (enter_namespaces() != 0) return -1;
  /* planned in the new mount namespace: a bind's source must be a mount of the namespace it is bound in */
  for (int j = 0; j + 1 < n; j += 2)
    if (plan(args[j + 1], strcmp(args[j], "--rw") == 0, 0) != 0) return -1;
  /* the new root: a tmpfs over /tmp (in this mount namespace only); the sources are held open already */
  const char *root = "/tmp";
  if (mount("kerncap-confine", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) return fail_errno("mount tmpfs on", root);
  qsort(items, (size_t)n_items, sizeof items[0], by_length); /* a folder before what lies in it */
  static char at[2 * PATH_MAX];
  for (int pass = 0; pass < 2; pass++) /* binds, then links (a link inside a bound folder is there already) */
    for (int i = 0; i < n_items; i++) {
      struct kc_item *it = &items[i];
      if ((pass == 0) != (it->target[0] == 0)) continue;
      if ((size_t)snprintf(at, sizeof at, "%s%s", root, it->path) >= sizeof at) return errno = ENAMETOOLONG, fail_errno("path", it->path);
      if (make_dirs(at, 0) != 0) return -1;
      if (pass == 1) {
        if (symlink(it->target, at) != 0 && errno != EEXIST) return fail_errno("symlink", at);
        continue;
      }
      if (it->dir ? mkdir(at, 0755) != 0 && errno != EEXIST : mknod(at, S_IFREG | 0644, 0) != 0 && errno != EEXIST)
        return fail_errno("mountpoint", at);
      char src[64];
      snprintf(src, sizeof src, "/proc/self/fd/%d", it->fd);
      if (mount(src, at, NULL, MS_BIND | MS_REC, NULL) != 0) return fail_errno("bind", it->path);
      struct statvfs sv;
      if (fstatvfs(it->fd, &sv) != 0) return fail_errno("statvfs", it->path);
      /* a remount keeps the flags the kernel locked on the source (nosuid, nodev, noexec…) */
      unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (it->rw ? 0 : MS_RDONLY);
      if (sv.f_flag & ST_NODEV) flags |= MS_NODEV;
      if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
      if (sv.f_flag & ST_RDONLY) flags |= MS_RDONLY;
      if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
      if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
      if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
      if (mount(NULL, at, NULL, flags, NULL) != 0) return fail_errno("remount", it->path);
      close(it->fd);
      it->fd = -1;
    }
  if (chdir(root) != 0) return fail_errno("chdir", root);
  if (syscall(SYS_pivot_root, ".", ".") != 0) return fail_errno("pivot_root", root);
  if (umount2(".", MNT_DETACH) != 0) return fail_errno("umount", "(the old root)");
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) return fail_errno("remount", "/");
  if (chdir(cwd) != 0) return fail_errno("chdir (the working folder is not in the tree)", cwd);
  return 0;
}

/* whether the tree can be made here: tried in a child, which exits at once */
static int can_hide(void) {
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2); /* the probe's failure is its answer, not a message */
    if (enter_namespaces() != 0) _exit(1);
    _exit(mount("kerncap-confine", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") == 0 ? 0 : 1);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* the Landlock ruleset of the --ro/--rw pairs `args` (n words), applied to this process (no_new_privs already set). @returns 0, or an exit code */
static int restrict_self(int abi, char **args, int n) {
  uint64_t handled = fs_rights(abi);
  struct kc_ruleset_attr attr = {.handled_access_fs = handled};
  if (abi >= 4) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP; /* no rule: every TCP bind and connect denied */
  if (abi >= 6) attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
  /* the struct's fields past what an older kernel knows are zero there, which it accepts */
  int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) {
    int e = errno;
    fprintf(stderr, "kerncap-confine: landlock_create_ruleset: %s\n", strerror(e));
    return e == ENOSYS || e == EOPNOTSUPP ? EXIT_UNSUPPORTED : EXIT_SETUP;
  }
  const uint64_t ro = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
  for (int j = 0; j + 1 < n; j += 2) {
    uint64_t want = strcmp(args[j], "--rw") == 0 ? handled : ro;
    if (add_path(ruleset, args[j + 1], want, handled) != 0) return EXIT_SETUP;
  }
  if (syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) {
    fprintf(stderr, "kerncap-confine: landlock_restrict_self: %s\n", strerror(errno));
    return EXIT_SETUP;
  }
  close(ruleset);
  return 0;
}

/* the process signals go on to (the init from the outer process, the program from the init) */
static volatile pid_t forward_to;
static void forward(int sig) {
  if (forward_to > 0) kill(forward_to, sig);
}
static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
static void forward_signals(int on) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on ? forward : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (size_t k = 0; k < sizeof FORWARDED / sizeof FORWARDED[0]; k++) sigaction(FORWARDED[k], &sa, NULL);
}

/* end this process as `status` (a wait status) says: the same exit code, or the same signal (no core) */
static int end_as(int status) {
  if (WIFSIGNALED(status)) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    forward_signals(0);
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_SETUP;
}

/* The program under an init, pid 1 of the PID namespace hide() made: the init forks the program, forwards the signals
 * it is sent (pid 1 receives only those it handles), reaps the orphans the namespace gets, and when the program ends
 * hands its wait status to this process and exits, which kills whatever the program left (the namespace ends with
 * its init). PR_SET_PDEATHSIG and the `alive` pipe kill the init, and so the namespace, when this process dies first
 * (a SIGKILL kerncap sent). @returns the program's exit code (or this process ends by its signal) */
static int run_under_init(char **prog) {
  int alive[2], report[2];
  if (pipe2(alive, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) return fail_errno("pipe", NULL), EXIT_SETUP;
  pid_t init = fork();
  if (init < 0) return fail_errno("fork", NULL), EXIT_SETUP;
  if (init == 0) {
    close(alive[1]);
    close(report[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char c;
    fcntl(alive[0], F_SETFL, O_NONBLOCK);
    if (read(alive[0], &c, 1) == 0) _exit(EXIT_SETUP); /* the outer process died before the death signal was set */
    pid_t child = fork();
    if (child < 0) _exit(EXIT_SETUP);
    if (child == 0) {
      close(alive[0]);
      close(report[1]);
      execvp(prog[0], prog);
      fprintf(stderr, "kerncap-confine: %s: %s\n", prog[0], strerror(errno));
      _exit(EXIT_EXEC);
    }
    forward_to = child;
    forward_signals(1);
    for (;;) {
      int st;
      pid_t p = waitpid(-1, &st, 0);
      if (p == child) {
        ssize_t w = write(report[1], &st, sizeof st);
        (void)w;
        _exit(0);
      }
      if (p < 0 && errno != EINTR) _exit(EXIT_SETUP);
    }
  }
  close(alive[0]);
  close(report[1]);
  forward_to = init;
  forward_signals(1);
  int st = 0, program = 0;
  while (waitpid(init, &st, 0) < 0)
    if (errno != EINTR) return fail_errno("waitpid", NULL), EXIT_SETUP;
  ssize_t n;
  while ((n = read(report[0], &program, sizeof program)) < 0 && errno == EINTR) {
  }
  return end_as(n == (ssize_t)sizeof program ? program : st);
}

static int usage(void) {
  fprintf(stderr, "usage: kerncap-confine --probe | kerncap-confine [--hide] [--ro PATH]... [--rw PATH]... -- PROGRAM ARG...\n");
  return EXIT_USAGE;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
    printf("abi=%d hide=%d\n", landlock_abi(), can_hide());
    return 0;
  }
  int i = 1;
  int hiding = i < argc && strcmp(argv[i], "--hide") == 0;
  if (hiding) i++;
  int first = i;
  for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
    if ((strcmp(argv[i], "--ro") != 0 && strcmp(argv[i], "--rw") != 0) || i + 1 >= argc) return usage();
  }
  if (i >= argc - 1) return usage();
  char **prog = argv + i + 1;

  int abi = landlock_abi();
  if (hiding) {
    if (hide(argv + first, i - first) != 0) return EXIT_HIDE;
  }
  if (abi < KC_MIN_ABI && !hiding) {
    fprintf(stderr, "kerncap-confine: this kernel has no Landlock (or it is disabled)\n");
    return EXIT_UNSUPPORTED;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    fprintf(stderr, "kerncap-confine: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
    return EXIT_SETUP;
  }
  /* the namespace tree alone where the kernel has no Landlock: reads and writes bounded by it, no network (its own namespace) */
  if (abi >= KC_MIN_ABI) {
    int rc = restrict_self(abi, argv + first, i - first);
    if (rc) return rc;
  }
  if (hiding) return run_under_init(prog);
  execvp(prog[0], prog);
  fprintf(stderr, "kerncap-confine: %s: %s\n", prog[0], strerror(errno));
  return EXIT_EXEC;
}
