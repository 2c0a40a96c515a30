/**
 * src/eval/candidates.ts: labels that tell apart candidates of one name, and the candidates that
 * do not fit the capture's src/ (a replacement file src/ lacks, a folder without the file the
 * build compiles), refused by name before any build as E_CANDIDATE.
 */
import { expect, test } from "bun:test";
import { existsSync, linkSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listedCandidates, materialise, parseCandidate, parseCandidates } from "../../../src/eval/candidates.ts";
import { copyReproducer } from "../../../src/eval/reproducer-copy.ts";
import { readCandidateFile } from "../../../src/eval/candidate-files.ts";
import { makeCapture, tempDir } from "../fixtures.ts";
import { log } from "../../../src/log.ts";

/** A CUDA capture whose manifest records its TU (src/kernel.cu, from the project root /proj) and a header. */
async function cudaCapture(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), '#include "util.h"\n__global__ void scale(float* x, int n) { x[0] *= TWO; }\n');
  writeFileSync(join(dir, "src/util.h"), "#define TWO 2.0f\n");
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  m.source = { cuda: { method: "source-root", tu: "/proj/kernel.cu", definition: "/proj/kernel.cu", projectRoot: "/proj" } };
  writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
  return dir;
}

test("candidates of one name get the shortest ends of their paths that differ; their identities stay; other labels unchanged", () => {
  const d = tempDir();
  for (const [f, text] of [
    ["cands/repl/saxpy.cu", "a"],
    ["cands/b/saxpy.cu", "b"],
    ["x/deep/b/saxpy.cu", "c"],
    ["cap-good/src/k.cu", "d"],
    ["cap-host/src/k.cu", "e"],
    ["one.patch", "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n"],
  ] as const) {
    mkdirSync(join(d, f, ".."), { recursive: true });
    writeFileSync(join(d, f), text);
  }
  const specs = ["cands/repl/saxpy.cu", "cands/b/saxpy.cu", "x/deep/b/saxpy.cu", "cap-good/src", "cap-host/src", "one.patch", "num_warps=4"].map((s) =>
    s.includes("=") ? s : join(d, s),
  );
  const cs = parseCandidates(specs);
  expect(cs.map((c) => c.label)).toEqual(["repl/saxpy.cu", "cands/b/saxpy.cu", "deep/b/saxpy.cu", "cap-good/src", "cap-host/src", "one.patch", "num_warps=4"]);
  expect(new Set(cs.map((c) => c.label)).size).toBe(cs.length);
  // the identity is the name and the content, as before: --resume of the same files finds them
  expect(cs[0]!.id).toBe(parseCandidate(specs[0]!).id);
  expect(cs[0]!.id).toStartWith("saxpy.cu@");
  // one folder named src alone: its parent's name too (nu15: a lone candidate labelled "src")
  expect(parseCandidates([join(d, "cap-good/src")]).map((c) => c.label)).toEqual(["cap-good/src"]);
});

test("a replacement file that names no file of src/ and a folder without the TU: E_CANDIDATE naming what is missing, before anything is built", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  writeFileSync(join(d, "other.cu"), "x");
  const file = await materialise(cap, parseCandidate(join(d, "other.cu")), join(d, "copy1")).catch((e) => e);
  expect(file).toMatchObject({ code: "E_CANDIDATE" });
  expect(file.message).toContain("src/ has no file named other.cu");
  // a folder holding only a readme: it replaces src/ whole and lacks the TU (a new user got a confined build's dependency-list error)
  mkdirSync(join(d, "empty-src"));
  writeFileSync(join(d, "empty-src/readme.txt"), "notes");
  const tree = await materialise(cap, parseCandidate(join(d, "empty-src")), join(d, "copy2")).catch((e) => e);
  expect(tree).toMatchObject({ code: "E_CANDIDATE" });
  expect(tree.message).toBe(
    `candidate ${join(d, "empty-src")} is a folder, so it replaces src/ whole, and it lacks src/kernel.cu, which the build compiles (it holds readme.txt)`,
  );
  expect(tree.hint).toContain(`cp -r ${join(cap, "src")} edited`);
  // a folder holding an edited src/ (the README's edits/*/ read as edits/a/src): said so, with the path to give (found by a new user)
  mkdirSync(join(d, "holder/src"), { recursive: true });
  writeFileSync(join(d, "holder/src/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
  const holder = await materialise(cap, parseCandidate(join(d, "holder")), join(d, "copy4")).catch((e) => e);
  expect(holder).toMatchObject({ code: "E_CANDIDATE" });
  expect(holder.message).toBe(
    `candidate ${join(d, "holder")} holds a src/ folder: a candidate folder is an edited copy of src/ itself (give ${join(d, "holder", "src")})`,
  );
  expect(holder.hint).toContain(`Give ${join(d, "holder", "src")} as the candidate`);
  // a folder with the TU but not the header: built (the compiler names the header)
  mkdirSync(join(d, "tu-only"));
  writeFileSync(join(d, "tu-only/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
  await materialise(cap, parseCandidate(join(d, "tu-only")), join(d, "copy3"));
  expect(readFileSync(join(d, "copy3/src/kernel.cu"), "utf8")).toContain("scale");
});

test("a patch that does not apply names each missing file once", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  writeFileSync(join(d, "bad.patch"), "--- a/nothere.cu\n+++ b/nothere.cu\n@@ -1 +1 @@\n-x\n+y\n");
  const e = await materialise(cap, parseCandidate(join(d, "bad.patch")), join(d, "copy")).catch((x) => x);
  expect(e.code).toBe("E_PATCH");
  expect(e.message).toContain("so it names nothere.cu, which src/ does not hold");
});

test("a candidate is read with no link followed, and what is built is what was given: a link refused, a candidate changed after it was given refused (trial 18 F7-F9)", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  writeFileSync(join(d, "secret.txt"), "the victim's secret\n");
  // F9: a replacement file that is a link (to a file of the user's that another user wants to read)
  symlinkSync(join(d, "secret.txt"), join(d, "kernel.cu"));
  expect(() => parseCandidate(join(d, "kernel.cu"))).toThrow(`candidate ${join(d, "kernel.cu")} is a symbolic link`);
  // a folder candidate that is a link
  mkdirSync(join(d, "real"));
  writeFileSync(join(d, "real/kernel.cu"), "x");
  symlinkSync(join(d, "real"), join(d, "linked"));
  expect(() => parseCandidate(join(d, "linked"))).toThrow("is a symbolic link");
  // F8: a tree whose file is swapped after it was given (the identity read one content, the build would read another)
  mkdirSync(join(d, "tree"));
  writeFileSync(join(d, "tree/kernel.cu"), readFileSync(join(cap, "src/kernel.cu")));
  writeFileSync(join(d, "tree/util.h"), "#define TWO 2.0f\n");
  const tree = parseCandidate(join(d, "tree"));
  writeFileSync(join(d, "tree/util.h"), '#include "/etc/shadow"\n');
  const changed = await materialise(cap, tree, join(d, "copy1")).catch((e) => e);
  expect(changed).toMatchObject({ code: "E_CANDIDATE" });
  expect(changed.message).toBe(`candidate ${join(d, "tree")} changed after kerncap eval read it`);
  // ... and one swapped for a link between the walk and the read: refused as a link
  rmSync(join(d, "tree/util.h"));
  symlinkSync(join(d, "secret.txt"), join(d, "tree/util.h"));
  expect(await materialise(cap, tree, join(d, "copy2")).catch((e) => e)).toMatchObject({
    code: "E_CANDIDATE",
    message: expect.stringContaining("util.h is a symbolic link"),
  });
  // F7: a patch swapped after its check for one that copies a file from anywhere: never given to git
  const good =
    '--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1,2 +1,2 @@\n #include "util.h"\n-__global__ void scale(float* x, int n) { x[0] *= TWO; }\n+__global__ void scale(float* x, int n) { x[0] *= TWO + 0.0f; }\n';
  writeFileSync(join(d, "fix.patch"), good);
  const patch = parseCandidate(join(d, "fix.patch"));
  writeFileSync(join(d, "fix.patch"), `diff --git a/x b/src/leak.h\ncopy from //${join(d, "secret.txt")}\ncopy to src/leak.h\n`);
  const swapped = await materialise(cap, patch, join(d, "copy3")).catch((e) => e);
  expect(swapped).toMatchObject({ code: "E_CANDIDATE", message: expect.stringContaining("changed after kerncap eval read it") });
  expect(existsSync(join(d, "copy3/src/leak.h"))).toBe(false);
  // the patch as given applies (from the checked copy, removed after git ran)
  writeFileSync(join(d, "fix.patch"), good);
  await materialise(cap, parseCandidate(join(d, "fix.patch")), join(d, "copy4"));
  expect(readFileSync(join(d, "copy4/src/kernel.cu"), "utf8")).toContain("TWO + 0.0f");
  expect(existsSync(join(d, "copy4.patch"))).toBe(false);
});

test("a candidate list (kerncap mcp's evaluate): each labelled as given; a config never looked up as a file; a refused one never materialised; bad lists refused", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  writeFileSync(join(d, "0.patch"), "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-a\n+b\n");
  writeFileSync(join(d, "BLOCK=4"), "a file a config's text names"); // in the folder eval runs in: never taken for the config
  const list = join(d, "list.json");
  const write = (candidates: readonly unknown[]) => writeFileSync(list, JSON.stringify({ candidates }));
  write([
    { label: "mine", spec: join(d, "0.patch") },
    { label: "cfg", config: "BLOCK=4" },
    {
      label: "bad",
      refused: { kind: "patch", code: "E_NOT_SOURCE", reason: "candidate bad's patch writes src/x, which is not a source file of the reproducer" },
    },
  ]);
  const cwd = process.cwd();
  process.chdir(d);
  let cs;
  try {
    cs = listedCandidates(list);
  } finally {
    process.chdir(cwd);
  }
  expect(cs.map((c) => [c.label, c.kind])).toEqual([
    ["mine", "patch"],
    ["cfg", "config"],
    ["bad", "patch"],
  ]);
  expect(cs[0]!.id).toStartWith("mine@");
  expect(cs[0]!.id.split("@")[1]).toBe(parseCandidate(join(d, "0.patch")).id.split("@")[1]); // the content's digest, as on the command line
  expect(cs[1]!.config?.kwargs).toEqual({ BLOCK: 4 });
  const e = await materialise(cap, cs[2]!, join(d, "copy")).catch((x) => x);
  expect(e).toMatchObject({ code: "E_NOT_SOURCE" });
  expect(existsSync(join(d, "copy"))).toBe(false);
  for (const [bad, why] of [
    [
      [
        { label: "a", spec: "x" },
        { label: "a", config: "A=1" },
      ],
      "two candidates are labelled a",
    ],
    [[{ label: "a", refused: { kind: "patch", code: "E_BUILD", reason: "x" } }], "is not a candidate list: candidates.0.refused.code: Invalid type"],
    // nu7 #4: the field at fault named, not the union's "Expected Object but received Object"
    [
      [
        { label: "a", config: "A=1" },
        { label: "b", refused: { kind: "files", code: "E_PATCH", reason: "x" } },
      ],
      "candidates.1.refused.kind: Invalid type",
    ],
    [[{ label: "a", spce: "x" }], "candidates.0: has none of spec, overlay, config, refused"],
    [[{ label: "../a", config: "A=1" }], "is not a candidate list"],
    [[], "is not a candidate list"],
  ] as const) {
    write(bad);
    expect(() => listedCandidates(list)).toThrow(why);
  }
});

test("NAME=VALUE is a config whatever the working folder holds; a file of that name is given as ./NAME=VALUE (trial 19: another user's folder named like a config in /tmp was built)", () => {
  const d = tempDir();
  mkdirSync(join(d, "BLOCK_M=64 num_warps=4"));
  writeFileSync(join(d, "BLOCK_M=64 num_warps=4/kernel.py"), "import os  # the other user's code\n");
  const cwd = process.cwd();
  process.chdir(d);
  try {
    const c = parseCandidate("BLOCK_M=64 num_warps=4");
    expect(c.kind).toBe("config");
    expect(c.config?.kwargs).toEqual({ BLOCK_M: 64 });
    expect(parseCandidate("./BLOCK_M=64 num_warps=4").kind).toBe("tree");
  } finally {
    process.chdir(cwd);
  }
});

test("a candidate file with other names (a hard link: a file of the user's another user linked into their folder) is refused (trial 19)", () => {
  const d = tempDir();
  writeFileSync(join(d, "secret.txt"), "the victim's\n");
  mkdirSync(join(d, "cand"));
  linkSync(join(d, "secret.txt"), join(d, "cand/kernel.cu"));
  expect(() => parseCandidate(join(d, "cand"))).toThrow("kernel.cu has 2 names (a hard link)");
  expect(() => parseCandidate(join(d, "cand/kernel.cu"))).toThrow("has 2 names (a hard link)");
});

test("a patch that writes build.sh is E_NOT_SOURCE, as kerncap mcp's evaluate and edit_file say it (nu7 #5: E_PATCH here); a patch's messages name the candidate's label, not the file it was written to (nu7 #6)", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  writeFileSync(join(d, "evil.patch"), "--- a/build.sh\n+++ b/build.sh\n@@ -1 +1 @@\n-x\n+y\n");
  const e = await materialise(cap, parseCandidate(join(d, "evil.patch")), join(d, "copy")).catch((x) => x);
  expect(e).toMatchObject({ code: "E_NOT_SOURCE", message: expect.stringContaining('the patch evil.patch writes "src/build.sh", which is not a source file') });
  expect(existsSync(join(d, "copy"))).toBe(false);
  // kerncap mcp's evaluate writes a candidate's patch as 3.patch; its messages name the candidate
  writeFileSync(join(d, "3.patch"), "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-no such line\n+b\n");
  const list = join(d, "list.json");
  writeFileSync(list, JSON.stringify({ candidates: [{ label: "badpatch", spec: join(d, "3.patch") }] }));
  const bad = await materialise(cap, listedCandidates(list)[0]!, join(d, "copy2")).catch((x) => x);
  const said = String(bad.message);
  expect(bad).toMatchObject({ code: "E_PATCH", message: expect.stringContaining("the patch badpatch does not apply to src/") });
  expect(String(bad.message)).not.toContain("3.patch");
  // its file is src/'s and its hunk is stale: said so, without the rule of how names are read (nu89 #9)
  expect(said).toContain("make the diff against the capture's current src/");
  expect(said).not.toContain("as git apply -p");
});

test("two paths of one name and content (a/saxpy.cu, b/saxpy.cu) are evaluated once, labelled by the path that tells them apart, and said naming both (nu7 #18: labelled saxpy.cu, said given more than once)", () => {
  const d = tempDir();
  for (const x of ["a", "b"]) {
    mkdirSync(join(d, x));
    writeFileSync(join(d, x, "saxpy.cu"), "same");
  }
  const lines: string[] = [];
  const orig = log.info;
  log.info = ((m: string) => void lines.push(m)) as typeof log.info;
  let cs;
  try {
    cs = parseCandidates([join(d, "a/saxpy.cu"), join(d, "b/saxpy.cu"), join(d, "a/saxpy.cu")]);
  } finally {
    log.info = orig;
  }
  expect(cs.map((c) => c.label)).toEqual(["a/saxpy.cu"]);
  expect(lines).toEqual([
    `candidate "${join(d, "b/saxpy.cu")}" has the name and content of "${join(d, "a/saxpy.cu")}": evaluated once, its records labelled "a/saxpy.cu"`,
    `candidate "${join(d, "a/saxpy.cu")}" is given more than once: evaluated once`,
  ]);
});

test("a patch with bare names (`diff -u kernel.cu edited.cu` inside src/, as many models write it) is read as git apply -p0 reads it; where no reading fits, the refusal says how names are read and what to do (nu10 #19)", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  const hunk = "@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 7.0f\n";
  // bare names of a file src/ holds: applied
  writeFileSync(join(d, "plain.patch"), `--- util.h\t2026-12-05 06:00:00.000000000 +0000\n+++ util.h\t2026-12-05 06:01:00.000000000 +0000\n${hunk}`);
  await materialise(cap, parseCandidate(join(d, "plain.patch")), join(d, "c1"));
  expect(readFileSync(join(d, "c1/src/util.h"), "utf8")).toBe("#define TWO 7.0f\n");
  // a name inside a folder of src/, as diff -u writes it there (-p1 would name a file src/ does not hold)
  mkdirSync(join(cap, "src/inc"));
  writeFileSync(join(cap, "src/inc/more.h"), "#define TWO 2.0f\n");
  writeFileSync(join(d, "nested.patch"), `--- inc/more.h\n+++ inc/more.h\n${hunk}`);
  await materialise(cap, parseCandidate(join(d, "nested.patch")), join(d, "c2"));
  expect(readFileSync(join(d, "c2/src/inc/more.h"), "utf8")).toBe("#define TWO 7.0f\n");
  // git diff's a/ b/ still -p1
  writeFileSync(join(d, "git.patch"), `diff --git a/util.h b/util.h\n--- a/util.h\n+++ b/util.h\n${hunk}`);
  await materialise(cap, parseCandidate(join(d, "git.patch")), join(d, "c3"));
  expect(readFileSync(join(d, "c3/src/util.h"), "utf8")).toBe("#define TWO 7.0f\n");
  // a bare name src/ does not hold: the refusal names it as read, with the rule and what to do
  writeFileSync(join(d, "typo.patch"), `--- utl.h\n+++ utl.h\n${hunk}`);
  const e = await materialise(cap, parseCandidate(join(d, "typo.patch")), join(d, "c4")).catch((x) => x);
  expect(e.code).toBe("E_PATCH");
  expect(e.message).toContain("as git apply -p0");
  expect(e.message).toContain("so it names utl.h, which src/ does not hold");
  expect(e.message).toContain("a/kernel.cu, is src/kernel.cu");
  expect(e.hint).toContain("diff -u FILE EDITED");
  // a bare name beside a/ b/ names, of no file of src/: -p1 leaves it empty; said with the rule (it was "writes src/, which is empty")
  writeFileSync(join(d, "dir.patch"), `--- foo.cu\n+++ b/foo.cu\n${hunk}`);
  const empty = await materialise(cap, parseCandidate(join(d, "dir.patch")), join(d, "c5")).catch((x) => x);
  expect(empty.code).toBe("E_PATCH");
  expect(empty.message).toContain("which is empty; its file names are read with their first folder taken off (as git apply -p1)");
  expect(empty.hint).toContain("git diff");
  // git diff at a repository's top, above the capture: a/cap/src/util.h (nu13): said, with the command that makes it right
  writeFileSync(join(d, "top.patch"), `diff --git a/cap/src/util.h b/cap/src/util.h\n--- a/cap/src/util.h\n+++ b/cap/src/util.h\n${hunk}`);
  const top = await materialise(cap, parseCandidate(join(d, "top.patch")), join(d, "c6")).catch((x) => x);
  expect(top.code).toBe("E_PATCH");
  expect(top.message).toContain("it was made from a folder above the capture: make it with git diff --relative inside the capture folder");
});

test("`diff -u FILE EDITED` inside src/ (the documented recipe: +++ names the edited copy, even by an absolute path) patches FILE, as patch(1) does; a --- name src/ does not hold is still refused (nu12 #1)", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  const hunk = "@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 7.0f\n";
  const ts = "\t2026-12-05 06:00:00.000000000 +0000";
  writeFileSync(join(d, "copy.patch"), `--- util.h${ts}\n+++ util.edited.h${ts}\n${hunk}`);
  await materialise(cap, parseCandidate(join(d, "copy.patch")), join(d, "c1"));
  expect(readFileSync(join(d, "c1/src/util.h"), "utf8")).toBe("#define TWO 7.0f\n");
  expect(existsSync(join(d, "c1/src/util.edited.h"))).toBe(false);
  // the edited copy elsewhere: `diff -u util.h /tmp/b.h`
  writeFileSync(join(d, "abs.patch"), `--- util.h${ts}\n+++ /tmp/b.h${ts}\n${hunk}`);
  await materialise(cap, parseCandidate(join(d, "abs.patch")), join(d, "c2"));
  expect(readFileSync(join(d, "c2/src/util.h"), "utf8")).toBe("#define TWO 7.0f\n");
  // the other way round (--- a name src/ does not hold, +++ an absolute path): refused as before, naming it
  writeFileSync(join(d, "out.patch"), `--- nothere.h${ts}\n+++ /etc/passwd${ts}\n${hunk}`);
  const e = await materialise(cap, parseCandidate(join(d, "out.patch")), join(d, "c3")).catch((x) => x);
  expect(e.code).toBe("E_PATCH");
  expect(e.message).toContain("its file names are read");
  expect(existsSync(join(d, "c3"))).toBe(false);
});

test("a tree candidate holding a hidden name or a tool's file (.fast.cuh, .git/config, a backup~) is refused as an overlay's is, never built nor copied into the capture (adversary 54: a tree built its hidden header, and its .git stayed in the kept copy)", async () => {
  const cap = await cudaCapture();
  const d = tempDir();
  for (const [extra, why] of [
    [".fast.cuh", "is a hidden name"],
    [".git/config", "names a tool's own files"],
    ["kernel.cu~", "holds a character outside letters"],
    ["sub/.cache/x.h", "is a hidden name"],
  ] as const) {
    const tree = join(d, `t${extra.length}`);
    rmSync(tree, { recursive: true, force: true });
    mkdirSync(join(tree, extra, ".."), { recursive: true });
    writeFileSync(join(tree, "kernel.cu"), '#include ".fast.cuh"\n__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n');
    writeFileSync(join(tree, "util.h"), "#define TWO 2.0f\n");
    writeFileSync(join(tree, extra), "#define FAST 1\n");
    const e = (() => {
      try {
        parseCandidate(tree);
      } catch (x) {
        return x;
      }
    })();
    expect(e, extra).toMatchObject({ code: "E_PACK_NAME" }); // as kerncap mcp's evaluate says of the same name
    expect((e as Error).message).toContain(why);
  }
  // the same tree without the extra file is a candidate, materialised with its two files
  const ok = join(d, "ok");
  mkdirSync(ok);
  writeFileSync(join(ok, "kernel.cu"), '#include "util.h"\n__global__ void scale(float* x, int n) { x[0] *= TWO; }\n');
  writeFileSync(join(ok, "util.h"), "#define TWO 2.0f\n");
  const c = parseCandidate(ok);
  expect(c.kind).toBe("tree");
  await materialise(cap, c, join(d, "copy"));
  expect(readFileSync(join(d, "copy/src/util.h"), "utf8")).toBe("#define TWO 2.0f\n");
});

test("a candidate tree's file is read through its folders with no link followed: a folder that is a link by the time it is read is refused (adversary 68's lead)", () => {
  const d = tempDir();
  const cand = join(d, "cand");
  mkdirSync(join(cand, "sub"), { recursive: true });
  writeFileSync(join(cand, "sub", "k.cu"), "__global__ void k() {}\n");
  const other = join(d, "other");
  mkdirSync(other);
  writeFileSync(join(other, "k.cu"), "PRIVATE\n");
  expect(readCandidateFile(cand, "sub/k.cu", lstatSync(join(cand, "sub", "k.cu"))).toString()).toContain("__global__");
  // sub/ swapped for a link after the walk's lstat of it, before its listing: the walk's lstat of the file went through the link
  renameSync(join(cand, "sub"), join(d, "sub.away"));
  symlinkSync(other, join(cand, "sub"));
  const seen = lstatSync(join(cand, "sub", "k.cu")); // other/k.cu, as the walk would have seen it
  expect(() => readCandidateFile(cand, "sub/k.cu", seen)).toThrow(/symbolic link/);
});

test("a read-only capture's copy is the user's to edit and remove: folders u+rwx, files u+rw (adversary 69: 0555 folders kept, the private folder left in TMPDIR)", async () => {
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"), { recursive: true });
  writeFileSync(join(cap, "src", "k.cu"), "__global__ void k() {}\n");
  Bun.spawnSync(["chmod", "-R", "a-w", cap]);
  try {
    copyReproducer(cap, join(d, "copy"));
    expect(statSync(join(d, "copy", "src")).mode & 0o700).toBe(0o700);
    expect(statSync(join(d, "copy", "src", "k.cu")).mode & 0o600).toBe(0o600);
    expect(statSync(join(cap, "src")).mode & 0o222).toBe(0); // the capture itself untouched
  } finally {
    Bun.spawnSync(["chmod", "-R", "u+w", cap]);
  }
});

test("a candidate list that is not UTF-8, or names a path through a lone surrogate escape, is refused (E_USAGE): it named another folder (adversary 69)", () => {
  const d = tempDir();
  mkdirSync(join(d, "cand\ufffd")); // the folder the mangled name would have named
  const bytes = join(d, "bytes.json");
  writeFileSync(bytes, Buffer.concat([Buffer.from('{"candidates": [{"label": "a", "spec": "cand'), Buffer.from([0xff]), Buffer.from('"}]}')]));
  expect(() => listedCandidates(bytes)).toThrow(/is not UTF-8 text/);
  const escaped = join(d, "escaped.json");
  writeFileSync(escaped, '{"candidates": [{"label": "a", "spec": "cand\\udcff"}]}');
  expect(() => listedCandidates(escaped)).toThrow(/candidates\[0\]\.spec holds a lone UTF-16 surrogate/);
});

test("a candidate's copy of a received capture is bounded: a sparse file counts whole (E_UNSAFE_PATH before a byte is written), a FIFO and the seal are left out, an unreadable file is E_IO naming it (adversary 89 #01)", async () => {
  const { REPRODUCER_COPY_MAX_BYTES } = await import("../../../src/eval/reproducer-copy.ts");
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src", "k.cu"), "__global__ void k() {}\n");
  writeFileSync(join(cap, "kerncap-made-here.json"), "{}", { mode: 0o600 });
  expect(Bun.spawnSync(["mkfifo", join(cap, "pipe")]).exitCode).toBe(0);
  copyReproducer(cap, join(d, "copy"));
  expect(readFileSync(join(d, "copy", "src", "k.cu"), "utf8")).toContain("__global__");
  expect(existsSync(join(d, "copy", "pipe"))).toBe(false);
  expect(existsSync(join(d, "copy", "kerncap-made-here.json"))).toBe(false);
  expect(existsSync(join(d, "copy", "kerncap.json"))).toBe(true);
  // a sparse file of more than the bound: a few KiB on disk, refused by its size, and nothing copied
  expect(Bun.spawnSync(["truncate", "-s", String(REPRODUCER_COPY_MAX_BYTES + 1), join(cap, "notes.bin")]).exitCode).toBe(0);
  expect(() => copyReproducer(cap, join(d, "copy2"))).toThrow(/holds more than 512 MiB of files outside memory\/, build\/ and profile\//);
  expect(existsSync(join(d, "copy2"))).toBe(false);
  rmSync(join(cap, "notes.bin"));
  // a file the user cannot read: a clear E_IO naming it, not an internal error (as root every file is readable: checked as another user only)
  if (process.getuid?.() !== 0) {
    writeFileSync(join(cap, "secret.txt"), "x", { mode: 0o000 });
    let err: unknown;
    try {
      copyReproducer(cap, join(d, "copy3"));
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe("E_IO");
    expect(String((err as Error).message)).toContain("secret.txt");
  }
});

test("a capture folder given as a candidate, built or not, is refused as one (E_CANDIDATE naming its src/), not for its build/ lock's name (nu89 #1)", async () => {
  const cap = await cudaCapture();
  mkdirSync(join(cap, "build"));
  writeFileSync(join(cap, "build", ".kerncap-build.lock"), "1\n"); // what a built capture holds
  let err: any;
  try {
    parseCandidate(cap);
  } catch (e) {
    err = e;
  }
  expect(err?.code).toBe("E_CANDIDATE");
  expect(err?.message).toContain(`is a capture folder (it holds kerncap.json): a candidate folder is an edited copy of src/ itself (give ${join(cap, "src")})`);
});

test("a candidate's copy counts folders as files: a capture of more empty folders than the bound is refused before any copy (adversary 90 #01b)", async () => {
  const { REPRODUCER_COPY_MAX_FILES, reproducerFiles } = await import("../../../src/eval/reproducer-copy.ts");
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "extra"));
  for (let i = 0; i <= REPRODUCER_COPY_MAX_FILES; i++) mkdirSync(join(cap, "extra", String(i)));
  expect(() => reproducerFiles(cap)).toThrow(`more than ${REPRODUCER_COPY_MAX_FILES} files and folders`);
  expect(() => copyReproducer(cap, join(d, "copy"))).toThrow("files and folders");
  expect(existsSync(join(d, "copy"))).toBe(false);
}, 30_000);
