/**
 * src/util/replace-folder.ts replaceFolder: --force's replacement of a folder removes the old one
 * whole, also when a folder of the user's in it has no write bit (a 0555 src/ro of an old export,
 * which rm -rf alone cannot empty: adversary 89 #05 found it left in DEST.tmp-PID-… without a word).
 */
import { expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { replaceFolder } from "../../src/util/replace-folder.ts";

// as root every folder can be emptied: the user whose folder lacks its write bit is played by nobody (seteuid)
test("--force replaces a folder holding a 0555 folder of the user's: nothing of the old one is left", () => {
  const base = mkdtempSync("/var/tmp/kerncap-replace-");
  chmodSync(base, 0o755);
  const root = process.getuid?.() === 0;
  const uid = root ? 65534 : process.getuid!();
  try {
    const work = join(base, "w");
    mkdirSync(join(work, "old", "src", "ro"), { recursive: true });
    writeFileSync(join(work, "old", "src", "ro", "f.cu"), "x");
    writeFileSync(join(work, "old", "notes.txt"), "y");
    if (root) Bun.spawnSync(["chown", "-R", `${uid}:${uid}`, work]);
    chmodSync(join(work, "old", "src", "ro"), 0o555);
    if (root) process.seteuid!(uid);
    try {
      replaceFolder(join(work, "old"), { refuse: () => undefined, place: (d) => mkdirSync(d) });
    } finally {
      if (root) process.seteuid!(0);
    }
    expect(readdirSync(work)).toEqual(["old"]); // no DEST.tmp-PID-… holder left
    expect(readdirSync(join(work, "old"))).toEqual([]); // the new, empty folder
  } finally {
    Bun.spawnSync(["chmod", "-R", "u+w", base]);
    rmSync(base, { recursive: true, force: true });
  }
});

test("--force does not enter a folder of the old one that others may write: what it holds may be theirs, or moved in by them; it is left, said (adversary 90 #07b)", async () => {
  const { spyOn } = await import("bun:test");
  const { log } = await import("../../src/log.ts");
  const base = mkdtempSync("/var/tmp/kerncap-replace-");
  try {
    const work = join(base, "w");
    mkdirSync(join(work, "old", "drop", "moved-in"), { recursive: true });
    writeFileSync(join(work, "old", "drop", "moved-in", "precious.txt"), "p");
    writeFileSync(join(work, "old", "mine.txt"), "m");
    chmodSync(join(work, "old", "drop"), 0o777); // a folder anyone may write (a received export's)
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      replaceFolder(join(work, "old"), { refuse: () => undefined, place: (d) => mkdirSync(d) });
    } finally {
      spy.mockRestore();
    }
    expect(readdirSync(join(work, "old"))).toEqual([]); // the new folder placed
    const held = readdirSync(work).filter((n) => n !== "old");
    expect(held.length).toBe(1); // the holder, kept with what was not removed
    expect(readFileSync(join(work, held[0]!, "old", "drop", "moved-in", "precious.txt"), "utf8")).toBe("p");
    expect(existsSync(join(work, held[0]!, "old", "mine.txt"))).toBe(false); // the user's own file went
    expect(warned.join("\n")).toContain(`${join(work, held[0]!)}: kerncap left there what it could not remove as its own: old/drop`);
  } finally {
    Bun.spawnSync(["chmod", "-R", "u+w", base]);
    rmSync(base, { recursive: true, force: true });
  }
});
