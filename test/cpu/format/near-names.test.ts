// "Did you mean …?" for a path that does not exist (src/format/near-names.ts): the distance, the
// suggestions beside the first missing part, and the hint of a verb given a mistyped capture folder.
import { describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { didYouMean, editDistance, nearPaths } from "../../../src/format/near-names.ts";
import { tempDir } from "../fixtures.ts";

const MAIN = join(import.meta.dir, "../../../src/cli/main.ts");

describe("editDistance", () => {
  test("insertions, deletions, substitutions and adjacent swaps count one each; beyond max: max + 1", () => {
    expect(editDistance("democap", "democap", 2)).toBe(0);
    expect(editDistance("democaq", "democap", 2)).toBe(1); // substitution
    expect(editDistance("demcap", "democap", 2)).toBe(1); // insertion
    expect(editDistance("demoocap", "democap", 2)).toBe(1); // deletion
    expect(editDistance("demoacp", "democap", 2)).toBe(1); // adjacent swap
    expect(editDistance("abcdef", "uvwxyz", 2)).toBe(3);
    expect(editDistance("a", "abcdefgh", 2)).toBe(3); // lengths alone exceed max
  });
});

describe("nearPaths", () => {
  test("folders a few edits away at the first missing part, the rest appended, nearest first; only existing paths", () => {
    const t = tempDir("kerncap-near-");
    for (const d of ["democap", "democat", "other", "cap-gemm", "cap-gemv"]) mkdirSync(join(t, d));
    mkdirSync(join(t, "democap", "src"));
    writeFileSync(join(t, "democapp"), "a file");
    expect(nearPaths(join(t, "democaq"), { folders: true })).toEqual([join(t, "democap"), join(t, "democat")]);
    // a file is suggested only where files may be
    expect(nearPaths(join(t, "democaq"))).toContain(join(t, "democapp"));
    expect(nearPaths(join(t, "democaq"), { folders: true })).not.toContain(join(t, "democapp"));
    // the missing part is inside the path: the rest appended, kept only where it exists
    expect(nearPaths(join(t, "democaq", "src"), { folders: true })).toEqual([join(t, "democap", "src")]);
    // every part exists, or nothing is near
    expect(nearPaths(join(t, "other"))).toEqual([]);
    expect(nearPaths(join(t, "zzzzzzzz"))).toEqual([]);
    // a relative path stays relative
    const here = process.cwd();
    try {
      process.chdir(t);
      expect(nearPaths("cap-gemx", { folders: true })).toEqual(["cap-gemm", "cap-gemv"]);
    } finally {
      process.chdir(here);
    }
  });

  test("a name from a shared folder is shown escaped (its control characters never reach the terminal raw)", () => {
    const t = tempDir("kerncap-near-");
    mkdirSync(join(t, "cap\x1b[2J"));
    const said = didYouMean(join(t, "cap\x1b[2Jx"), { folders: true });
    expect(said).toContain("Did you mean");
    expect(said).not.toContain("\x1b");
  });

  test("a link beside it is suggested by its own name (the path the user would type)", () => {
    const t = tempDir("kerncap-near-");
    mkdirSync(join(t, "real"));
    symlinkSync(join(t, "real"), join(t, "democap"));
    expect(nearPaths(join(t, "democaq"))).toEqual([join(t, "democap")]);
  });
});

describe("a verb given a mistyped capture folder", () => {
  test("E_NOT_CAPTURE's hint names the capture folder beside it", () => {
    const t = tempDir("kerncap-near-");
    mkdirSync(join(t, "democap"));
    writeFileSync(join(t, "democap", "kerncap.json"), "{}");
    const r = Bun.spawnSync([process.execPath, MAIN, "inspect", "democaq", "--json"], { cwd: t, stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode).toBe(2);
    const doc = JSON.parse(r.stdout.toString());
    expect(doc.error.code).toBe("E_NOT_CAPTURE");
    expect(doc.error.hint).toContain("Did you mean democap?");
  });
});

test("a folder past NEAR_FOLDER_MAX_BYTES is not listed: no suggestion, at once (adversary round 71: a million names cost 1.6 s and 500 MB)", async () => {
  const { NEAR_FOLDER_MAX_BYTES } = await import("../../../src/format/near-names.ts");
  const { statSync } = await import("node:fs");
  const t = tempDir("kerncap-near-");
  mkdirSync(join(t, "democap"));
  expect(nearPaths(join(t, "democaq"))).toEqual([join(t, "democap")]);
  // names until the folder's size passes the bound (long names: few of them)
  for (let i = 0; statSync(t).size <= NEAR_FOLDER_MAX_BYTES; i++) writeFileSync(join(t, `${"n".repeat(200)}${i}`), "");
  const t0 = performance.now();
  expect(nearPaths(join(t, "democaq"))).toEqual([]);
  expect(performance.now() - t0).toBeLessThan(1000);
}, 60_000);
