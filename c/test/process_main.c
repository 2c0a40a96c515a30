/* Test driver for c/common/kc_process.c (test/cpu/capture/process.test.ts builds it with that file and runs it).
 *   process_main race DIR N   fork N children that number themselves and race for the claim at
 *                             once; prints {"winners":w,"numbers":[...],"claimed_by":pid}
 *   process_main ident DIR    kc_proc_init in this process (selection from the environment) and
 *                             one claim; prints {"init":rc,"error":...,"admitted":b,"claim":c,"identity":{...}}
 *   process_main uuid         prints the formatted UUID of the bytes 00 01 .. 0f */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../common/kc_json.h"
#include "../common/kc_process.h"

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "uuid")) {
    unsigned char b[16];
    char s[41];
    for (int i = 0; i < 16; i++) b[i] = (unsigned char)i;
    kc_uuid_str(b, s);
    printf("%s\n", s);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "race")) {
    int n = atoi(argv[3]);
    int fds[256][2];
    if (n < 1 || n > 256) return 2;
    int go[2];
    if (pipe(go)) return 2;
    for (int i = 0; i < n; i++) {
      if (pipe(fds[i])) return 2;
      if (fork() == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) < 0) _exit(3); /* every child starts when the pipe closes */
        kc_proc_t P;
        char err[256];
        kc_proc_init(&P, argv[2], err, sizeof err);
        int won = kc_claim(&P);
        char b[64];
        int l = snprintf(b, sizeof b, "%d %ld %d\n", won, P.number, (int)getpid());
        if (write(fds[i][1], b, (size_t)l) != l) _exit(4);
        _exit(0);
      }
      close(fds[i][1]);
    }
    close(go[0]);
    close(go[1]);
    int winners = 0, winner_pid = 0;
    printf("{\"numbers\":[");
    for (int i = 0; i < n; i++) {
      char b[64] = {0};
      if (read(fds[i][0], b, sizeof b - 1) <= 0) return 5;
      int won, pid;
      long num;
      if (sscanf(b, "%d %ld %d", &won, &num, &pid) != 3) return 6;
      if (won == 1) { winners++; winner_pid = pid; }
      printf("%s%ld", i ? "," : "", num);
    }
    while (wait(NULL) > 0) {}
    printf("],\"winners\":%d,\"claimed_by\":%d}\n", winners, winner_pid);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "ident")) {
    kc_proc_t P;
    char err[256] = "";
    int rc = kc_proc_init(&P, argv[2], err, sizeof err);
    int claim = P.admitted ? kc_claim(&P) : 0;
    static const char *const vis[] = {"CUDA_VISIBLE_DEVICES", NULL};
    printf("{\"init\":%d,\"error\":", rc);
    kc_json_str(stdout, err);
    printf(",\"admitted\":%s,\"why\":", P.admitted ? "true" : "false");
    kc_json_str(stdout, P.why);
    printf(",\"claim\":%d,\"identity\":", claim);
    kc_proc_json(stdout, &P, vis, "GPU-test", "0000:01:00.0");
    printf("}\n");
    return 0;
  }
  return 2;
}
