/**
 * src/process-group.ts PARENT_WATCH_SCRIPT, the watcher beside a tool child: it signals the child
 * once its parent is gone, and only while the pid is still the process it first read (stat's
 * start time unchanged). Run against a stand-in /proc (its 3rd argument) whose status and stat the
 * test writes, naming a real `sleep` as the child: the test plays the parent's death and a pid
 * taken again by another process, and sees whether the sleep got the signal.
 */
import { expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PARENT_WATCH_SCRIPT, WATCHER_PATH } from "../../src/process-group.ts";
import { tempDir } from "./fixtures.ts";

/** A stand-in /proc/PID: status with PPid, stat whose field 22 (20th after the command) is `start`. */
function writeProc(root: string, pid: number, ppid: number, start: number): void {
  const d = join(root, String(pid));
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, "status"), `Name:\tsleep\nPPid:\t${ppid}\n`);
  // pid (comm) state ppid … : 19 fields after "(comm) " before starttime
  writeFileSync(join(d, "stat"), `${pid} (sl) eep) S ${ppid} ${Array.from({ length: 16 }, (_, i) => i).join(" ")} 0 ${start} 0\n`);
}

async function watch(pidTakenAgain: boolean): Promise<{ signalled: boolean; watcherCode: number }> {
  const root = tempDir();
  const child = Bun.spawn(["sleep", "30"], { stdout: "ignore", stderr: "ignore" });
  try {
    writeProc(root, child.pid, 4242, 1000);
    // as kerncap starts it: /bin/sh, the system's PATH alone, in / (its tools never a relative PATH entry's: adversary round 71)
    const w = Bun.spawn(["/bin/sh", "-c", PARENT_WATCH_SCRIPT, "sh", "4242", String(child.pid), root], {
      env: { PATH: WATCHER_PATH },
      cwd: "/",
      stdout: "ignore",
      stderr: "ignore",
    });
    await Bun.sleep(300); // the watcher has read the start time and sleeps beside a living parent
    expect(w.exitCode).toBe(null);
    // the parent dies (the child is reparented); with pidTakenAgain the pid is another process's now
    writeProc(root, child.pid, 1, pidTakenAgain ? 2000 : 1000);
    const done = pidTakenAgain ? w.exited : child.exited;
    const settled = await Promise.race([done.then(() => true), Bun.sleep(3000).then(() => false)]);
    if (!settled && !pidTakenAgain) return { signalled: false, watcherCode: -1 };
    return { signalled: child.signalCode !== null, watcherCode: w.exitCode ?? -1 };
  } finally {
    child.kill("SIGKILL");
  }
}

test("the parent gone: the child gets SIGTERM", async () => {
  const r = await watch(false);
  expect(r.signalled).toBe(true);
  expect(r.watcherCode).toBe(-1); // still there: it would send SIGKILL 5 s on if the child outlived SIGTERM
});

test("the parent gone but the pid taken again by another process (start time changed): no signal, the watcher leaves", async () => {
  const r = await watch(true);
  expect(r.signalled).toBe(false);
  expect(r.watcherCode).toBe(0); // it left at once, without waiting to send SIGKILL
});

test("the stat's start time is field 22 whatever the command name holds (spaces, parentheses)", () => {
  const root = tempDir();
  writeProc(root, 77, 1, 123456);
  const r = Bun.spawnSync(["sh", "-c", `${PARENT_WATCH_SCRIPT.split("; s0=")[0]}; st`, "sh", "1", "77", root]);
  expect(r.stdout.toString().trim()).toBe("123456");
});
