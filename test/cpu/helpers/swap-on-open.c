/*
 * swap-on-open DIR NAME NTH SRC DST: watch DIR (inotify IN_OPEN), print "ready", and at the NTH
 * open of DIR/NAME rename SRC over DST at once; exit 0 when swapped, 1 after 30 s without.
 * The race another local user runs against a reader that opens a file by name twice (a check,
 * then a read): made deterministic for the tests (test/cpu/attacks-races.test.ts).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 6) return 2;
  int fd = inotify_init1(0), want = atoi(argv[3]), seen = 0;
  if (fd < 0 || inotify_add_watch(fd, argv[1], IN_OPEN) < 0) return 2;
  printf("ready\n");
  fflush(stdout);
  char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
  struct pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, 30000) > 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    for (char *q = buf; n > 0 && q < buf + n;) {
      struct inotify_event *e = (struct inotify_event *)q;
      if (e->len && strcmp(e->name, argv[2]) == 0 && ++seen == want) return rename(argv[4], argv[5]) == 0 ? 0 : 3;
      q += sizeof *e + e->len;
    }
  }
  return 1;
}
