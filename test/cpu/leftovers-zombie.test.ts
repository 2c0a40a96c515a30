/**
 * pidAlive (src/leftovers.ts): a zombie (ended, not reaped by its parent) is no live process: its
 * locks and temp folders are taken over (adversary 35: a killed check's results lock refused
 * --resume while the parent had not reaped it).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { pidAlive } from "../../src/leftovers.ts";

test("a zombie reads as gone; a live process (this one) as alive; a pid no process has as gone", async () => {
  // `true` ends at once; its parent execs sleep, which never reaps it: a zombie for the sleep's life
  const sh = Bun.spawn(["sh", "-c", "true & echo $!; exec sleep 10"], { stdout: "pipe" });
  try {
    const pid = Number(new TextDecoder().decode((await sh.stdout.getReader().read()).value).trim());
    let state = "";
    for (let i = 0; i < 100 && state !== "Z"; i++) {
      await Bun.sleep(20);
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    }
    expect(state).toBe("Z");
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(sh.pid)).toBe(true);
    expect(pidAlive(2 ** 22 + 12345)).toBe(false);
  } finally {
    sh.kill("SIGKILL");
    await sh.exited;
  }
});
