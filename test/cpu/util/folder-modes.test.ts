/**
 * src/util/folder-modes.ts: every folder kerncap writes (demo, an unpacked archive, an export)
 * takes the umask's bits away the same way, and under a setgid parent (a team folder) gives every
 * entry the parent's group and every folder the setgid bit (trial 11 #9, #19: under umask 077 a
 * demo's kerncap.json and an unpacked capture's memory images were world-readable; in a 3770 team
 * folder only a capture's top folder was the team's).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../src/capture/demo.ts";
import { exportCapture } from "../../../src/export/export.ts";
import { packCapture } from "../../../src/format/pack.ts";
import { unpackArchive } from "../../../src/format/unpack.ts";
import { tempDir } from "../fixtures.ts";

/** Every entry of `dir` (itself included) with its stat, no link followed. */
function entries(dir: string): { rel: string; mode: number; gid: number; dir: boolean }[] {
  const out: { rel: string; mode: number; gid: number; dir: boolean }[] = [];
  const walk = (p: string, rel: string) => {
    const st = lstatSync(p);
    out.push({ rel, mode: st.mode & 0o7777, gid: st.gid, dir: st.isDirectory() });
    if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n), rel ? `${rel}/${n}` : n);
  };
  walk(dir, "");
  return out;
}

/** A group this process may give its files other than its own: root any, another user one of its supplementary groups. */
function otherGroup(): number | undefined {
  if (process.geteuid?.() === 0) return 4242;
  return process.getgroups?.().find((g) => g !== process.getegid?.());
}

describe("the umask", () => {
  let saved = 0;
  beforeEach(() => {
    saved = process.umask(0o077);
  });
  afterEach(() => {
    process.umask(saved);
  });

  test("under umask 077 a demo, its unpacked archive and its export are private: folders 0700, files 0600, build.sh 0700", async () => {
    const d = tempDir();
    writeDemo(join(d, "demo"), false);
    await packCapture(join(d, "demo"), join(d, "demo.zip"));
    await unpackArchive(join(d, "demo.zip"), join(d, "unpacked"));
    exportCapture(join(d, "demo"), join(d, "export"));
    for (const out of ["demo", "unpacked", "export"]) {
      const all = entries(join(d, out));
      expect(all.length).toBeGreaterThan(5);
      for (const e of all) {
        // nothing for group or other; an executable keeps its owner's x (build.sh), folders are 0700
        expect({ out, rel: e.rel, others: e.mode & 0o077 }).toEqual({ out, rel: e.rel, others: 0 });
        if (e.dir) expect(e.mode & 0o700).toBe(0o700);
      }
    }
    expect(statSync(join(d, "demo/build.sh")).mode & 0o777).toBe(0o700);
  });
});

describe("a setgid parent (a team folder)", () => {
  const gid = otherGroup();
  test.skipIf(gid === undefined)(
    "a demo, an unpacked archive and an export in it: every entry the parent's group, every folder setgid, umask 022's modes",
    async () => {
      const saved = process.umask(0o022);
      try {
        const mine = tempDir();
        writeDemo(join(mine, "demo"), false);
        await packCapture(join(mine, "demo"), join(mine, "demo.zip"));
        const team = join(tempDir(), "team");
        mkdirSync(team);
        chownSync(team, -1, gid!);
        chmodSync(team, 0o3775 & ~0o002);
        writeDemo(join(team, "demo"), false);
        await unpackArchive(join(mine, "demo.zip"), join(team, "unpacked"));
        exportCapture(join(mine, "demo"), join(team, "export"));
        for (const out of ["demo", "unpacked", "export"]) {
          const all = entries(join(team, out));
          expect(all.filter((e) => e.gid !== gid).map((e) => `${out}/${e.rel}`)).toEqual([]);
          expect(all.filter((e) => e.dir && !(e.mode & 0o2000)).map((e) => `${out}/${e.rel}`)).toEqual([]);
          expect(all.filter((e) => e.mode & 0o022).map((e) => `${out}/${e.rel}`)).toEqual([]); // never group/other write
        }
        expect(statSync(join(team, "demo/kerncap.json")).mode & 0o777).toBe(0o644);
      } finally {
        process.umask(saved);
      }
    },
  );
});
