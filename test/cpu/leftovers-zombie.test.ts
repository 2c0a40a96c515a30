/**
 * pidAlive (src/leftovers.ts): a zombie (ended, not reaped by its parent) is no live process: its
 * locks and temp folders are taken over (adversary 35: a killed check's results lock refused
 * --resume while the parent had not reaped it).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { pidAlive } from "../../src/leftovers.ts";

test("a zombie reads as gone; a live process (this one) as alive; a pid no process has as gone", async () => {
  // the background sleep ends after its parent has exec'd sleep 10, which never reaps it: a zombie for the sleep's life. On
  // a machine so loaded that the shell execs only after the child ended, the shell may reap it first: then another try
  let seen = false;
  for (let attempt = 0; attempt < 10 && !seen; attempt++) {
    const sh = Bun.spawn(["sh", "-c", "sleep 0.3 & echo $!; exec sleep 10"], { stdout: "pipe" });
    try {
      const pid = Number(new TextDecoder().decode((await sh.stdout.getReader().read()).value).trim());
      let state = "";
      for (let i = 0; i < 100 && state !== "Z"; i++) {
        await Bun.sleep(20);
        let stat: string;
        try {
          stat = readFileSync(`/proc/${pid}/stat`, "latin1");
        } catch {
          break; // reaped by the shell before its exec
        }
        state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      }
      if (state !== "Z") continue;
      seen = true;
      expect(pidAlive(pid)).toBe(false);
      expect(pidAlive(process.pid)).toBe(true);
      expect(pidAlive(sh.pid)).toBe(true);
      expect(pidAlive(2 ** 22 + 12345)).toBe(false);
    } finally {
      sh.kill("SIGKILL");
      await sh.exited;
    }
  }
  expect(seen).toBe(true);
});

// adversary 35: an output named with 230-254 characters (the limit is 255) was refused, its temp name too long
test("a temp name fits NAME_MAX whatever the output's name: a long name's stem is shortened (whole characters), a short one kept", async () => {
  const { tempFor, tempStem } = await import("../../src/leftovers.ts");
  const { basename } = await import("node:path");
  expect(basename(tempFor("/x/out.zip"))).toMatch(/^out\.zip\.tmp-\d+-[0-9a-z]{16}$/);
  for (const name of ["c".repeat(254), "é".repeat(127), `${"a".repeat(220)}é€😀`]) {
    const t = basename(tempFor(`/x/${name}`));
    expect(Buffer.byteLength(t)).toBeLessThanOrEqual(255);
    expect(name.startsWith(tempStem(name))).toBe(true);
    expect(t.startsWith(`${tempStem(name)}.tmp-`)).toBe(true);
    expect(t.includes("\uFFFD")).toBe(false);
  }
  // a 254-character output really made: unpack's and export's temps go through tempFor
  const { mkdtempSync, mkdirSync, rmSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { tmpdir } = await import("node:os");
  const d = mkdtempSync(join(tmpdir(), "kerncap-long-"));
  try {
    mkdirSync(tempFor(join(d, "d".repeat(254))));
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});
