/**
 * src/util/replace-folder.ts replaceFolder: --force's replacement of a folder removes the old one
 * whole, also when a folder of the user's in it has no write bit (a 0555 src/ro of an old export,
 * which rm -rf alone cannot empty: adversary 89 #05 found it left in DEST.tmp-PID-… without a word).
 */
import { expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
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
