/**
 * src/path-walk.ts walkPhysically: a path walked as the kernel resolves it (links in their place,
 * `..` from where the links led), the one walk that buildChildEnv and refusePlantedLinks judge.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PathStep, walkPhysically } from "../../src/path-walk.ts";

const root = realpathSync(mkdtempSync(join(tmpdir(), "kerncap-walk-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));
mkdirSync(join(root, "a/b/c"), { recursive: true });
mkdirSync(join(root, "x/y"), { recursive: true });
symlinkSync(join(root, "a/b"), join(root, "abs")); // absolute target
symlinkSync("a/b/c", join(root, "rel")); // relative target
symlinkSync("loop2", join(root, "loop1"));
symlinkSync("loop1", join(root, "loop2"));

/** The steps as text: `path→at` for an entry (`path⇒target→at` for a link), `?path+rest` for a missing one, `loop`. */
function steps(p: string): string[] {
  return [...walkPhysically(p)].map((s: PathStep) =>
    s.kind === "loop" ? "loop" : s.kind === "missing" ? `?${s.path}+${s.rest.join("/")}` : `${s.path}${s.target === undefined ? "" : `⇒${s.target}`}→${s.at}`,
  );
}
const r = (s: string) => s.replaceAll(root, "R");

describe("walkPhysically", () => {
  test("a plain path: one entry a component, `.` and empty components no step", () => {
    const got = steps(`${root}//a/./b`).map(r);
    expect(got.slice(-2)).toEqual(["R/a→R/a", "R/a/b→R/a/b"]);
    // the folders above the root come first, each an entry standing where it names
    expect(got.length).toBe(root.split("/").filter(Boolean).length + 2);
  });

  test("`..` after a link goes up from where the link led, not by the text", () => {
    // textually R/abs/.. is R; physically it is R/a (abs → R/a/b)
    const got = steps(`${root}/abs/../b/c`).map(r);
    expect(got).toContain("R/abs⇒R/a/b→/");
    // the target walked from the root to R/a/b, then `..` to R/a, then b and c (R/b/c, the text's answer, does not exist)
    expect(got.slice(-4)).toEqual(["R/a→R/a", "R/a/b→R/a/b", "R/a/b→R/a/b", "R/a/b/c→R/a/b/c"]);
  });

  test("a relative link's target is walked from the folder the link lies in", () => {
    const all = [...walkPhysically(`${root}/rel/..`)];
    const link = all.find((s) => s.kind === "entry" && s.target !== undefined);
    expect(link?.kind === "entry" && [link.path, link.parent, link.at]).toEqual([join(root, "rel"), root, root]);
    const last = all.at(-1);
    expect(last?.kind === "entry" && last.path).toBe(join(root, "a/b/c"));
  });

  test("a missing component ends the walk with the text not walked", () => {
    expect(steps(`${root}/x/nope/z/w`).slice(-2).map(r)).toEqual(["R/x→R/x", "?R/x/nope+z/w"]);
  });

  test("more than 40 links is a loop", () => {
    expect(steps(`${root}/loop1/q`).at(-1)).toBe("loop");
  });

  test("a relative path is walked from the working folder", () => {
    const here = process.cwd();
    try {
      process.chdir(join(root, "x"));
      expect(steps("y").at(-1)).toBe(`${join(root, "x/y")}→${join(root, "x/y")}`);
    } finally {
      process.chdir(here);
    }
  });
});

test("a path that grows past PATH_MAX through links (the kernel follows it in place): the walk says ENAMETOOLONG, refusePlantedLinks refuses it (adversary 90 #04a)", async () => {
  const { refusePlantedLinks } = await import("../../src/util/write-file.ts");
  const deep = mkdtempSync(join(tmpdir(), "kerncap-walk-deep-"));
  try {
    // two links of 9 folders of 250 characters each: every link's target is short enough, the walked path is not (made by
    // bash's relative cd: a process's getcwd fails past PATH_MAX)
    const nine = Array(9).fill("d".repeat(250)).join("/");
    const made = Bun.spawnSync(["bash", "-c", `set -e; cd "$1"; mkdir -p ${nine}; ln -s ${nine} s1; cd s1; mkdir -p ${nine}; ln -s ${nine} s2`, "bash", deep]);
    expect(made.exitCode, made.stderr.toString()).toBe(0);
    const last = [...walkPhysically(`${deep}/s1/s2/x`)].at(-1);
    expect(last?.kind === "missing" && last.code).toBe("ENAMETOOLONG");
    expect(() => refusePlantedLinks(`${deep}/s1/s2/x`)).toThrow("longer than the system's limit");
  } finally {
    Bun.spawnSync(["rm", "-rf", deep]); // coreutils' rm walks a tree past PATH_MAX
  }
});
