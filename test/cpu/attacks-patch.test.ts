/**
 * The attack suite of candidate patches (kerncap mcp's `evaluate` and `kerncap eval`,
 * docs/security.md): a patch is read whole as git apply reads it (src/eval/patch.ts), so no
 * spelling git accepts gets a name or a mode past the rule. Each row was found by someone who had
 * not seen the code:
 *  - git's C-quoted names (`"b/src/x\056sh"` is src/x.sh; ESC and U+202E as octal escapes);
 *  - a header-only diff (a new empty file: no ---/+++ lines, the names on the diff --git line);
 *  - a mode line git reads with strtoul (`new file mode  120000`, two spaces; `+120000`; a tab;
 *    the mode of an index line);
 *  - a header line kerncap does not read, a binary patch.
 * Each is refused by the MCP tool (nothing written: the candidate's record an error) and by eval's own application of the patch
 * (E_PATCH, the candidate's copy removed, git never run); patches as git diff and diff -ru write
 * them still apply.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { materialise, parseCandidate, patchModeProblem } from "../../src/eval/candidates.ts";
import { writeCandidates } from "../../src/mcp/evaluate.ts";
import { evaluateRefusal, makeCapture, tempDir } from "./fixtures.ts";

async function capture(): Promise<string> {
  const cap = join(tempDir("kerncap-attack-"), "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  return cap;
}

const refused = (f: () => unknown): { code: string; message: string } => {
  try {
    f();
  } catch (e) {
    return e as { code: string; message: string };
  }
  throw new Error("not refused");
};

const HUNK = "@@ -0,0 +1,2 @@\n+#!/bin/sh\n+id > /tmp/whatever\n";
/** A new file `name` (as written on the diff --git and +++ lines: quoted or not) with HUNK. */
const newFile = (name: string) => `diff --git ${name.replace("b/", "a/")} ${name}\nnew file mode 100644\n--- /dev/null\n+++ ${name}\n${HUNK}`;

/** Patches that must never reach git apply, each with the codes the MCP tool may refuse it with. */
const HOSTILE: [string, string, string[]][] = [
  ["quoted src/x.sh", newFile('"b/src/x\\056sh"'), ["E_NOT_SOURCE"]],
  ["quoted src/build.sh", newFile('"b/src/build\\056sh"'), ["E_NOT_SOURCE"]],
  ["quoted src/kerncap.json", newFile('"b/src/kerncap\\056json"'), ["E_NOT_SOURCE"]],
  ["quoted ESC and U+202E", newFile('"b/src/a\\033[2Jb\\342\\200\\256.cu"'), ["E_PATCH", "E_PACK_NAME"]],
  ["quoted name inside src/", newFile('"b/x\\056sh"'), ["E_NOT_SOURCE"]],
  [
    "header-only src/x.sh and src/kerncap.json",
    "diff --git a/src/x.sh b/src/x.sh\nnew file mode 100644\nindex 0000000..e69de29\ndiff --git a/src/kerncap.json b/src/kerncap.json\nnew file mode 100644\nindex 0000000..e69de29\n",
    ["E_NOT_SOURCE"],
  ],
  ["header-only quoted", 'diff --git "a/x\\056sh" "b/x\\056sh"\nnew file mode 100644\nindex 0000000..e69de29\n', ["E_NOT_SOURCE"]],
  [
    "two spaces before 120000",
    "diff --git a/l.h b/l.h\nnew file mode  120000\n--- /dev/null\n+++ b/l.h\n@@ -0,0 +1 @@\n+/root/.ssh/id_rsa\n\\ No newline at end of file\n",
    ["E_PATCH"],
  ],
  ["+120000", "diff --git a/l.h b/l.h\nnew file mode +120000\n--- /dev/null\n+++ b/l.h\n@@ -0,0 +1 @@\n+/etc/hostname\n", ["E_PATCH"]],
  ["a tab before 120000", "diff --git a/l.h b/l.h\nnew file mode \t120000\n--- /dev/null\n+++ b/l.h\n@@ -0,0 +1 @@\n+/etc/hostname\n", ["E_PATCH"]],
  [
    "the index line's mode 120000",
    "diff --git a/l.h b/l.h\nnew file mode 100644\nindex 0000000..1234567 120000\n--- /dev/null\n+++ b/l.h\n@@ -0,0 +1 @@\n+/etc/hostname\n",
    ["E_PATCH"],
  ],
  [
    "typechange of kernel.cu",
    "diff --git a/kernel.cu b/kernel.cu\ndeleted file mode 100644\nindex 1234567..0000000\ndiff --git a/kernel.cu b/kernel.cu\nnew file mode 0120000\nindex 0000000..1234567\n",
    ["E_PATCH"],
  ],
  [
    "a header line kerncap does not read",
    "diff --git a/kernel.cu b/kernel.cu\nnew  file mode 100644\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-x\n+y\n",
    ["E_PATCH"],
  ],
  [
    "a binary patch",
    "diff --git a/k.cu b/k.cu\nindex 1234567..89abcde 100644\nGIT binary patch\nliteral 1\nIcmZPo000310RR91\n\nliteral 0\nKcmV+b0RR6000031\n",
    ["E_PATCH"],
  ],
  ["a name followed by more than a timestamp", "--- a/x.sh\t.cu\n+++ b/x.sh\t.cu\n@@ -0,0 +1 @@\n+id\n", ["E_PATCH"]],
  // git takes no ctime date for one and ends the name at a tab only: after a space it is part of the name (adversary 79 #15)
  ["a ctime date after a space", "--- a/kernel.cu Thu Jan  1 00:00:00 1970\n+++ b/kernel.cu Thu Jan  1 00:00:00 1970\n@@ -1 +1 @@\n-x\n+y\n", ["E_PATCH"]],
  ["a hunk line that is none", "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-x\n+y\n+z\n", ["E_PATCH"]],
  ["text before the first diff", "Subject: a fix\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-x\n+y\n", ["E_PATCH"]],
];

describe("candidate patches are read as git apply reads them", () => {
  test("every spelling of a forbidden name or mode is refused by kerncap mcp's evaluate, nothing written (the candidate's record says why)", async () => {
    const cap = await capture();
    for (const [what, patch, codes] of HOSTILE) {
      expect(codes, what).toContain(evaluateRefusal(cap, { name: "c", patch }).code);
    }
  });

  test("and by eval's application of the patch itself (a candidate made by hand): evaluate's code (E_PATCH, or E_NOT_SOURCE/E_PACK_NAME for a name: nu7 #5), git never run, the copy removed", async () => {
    const cap = await capture();
    const root = tempDir();
    for (const [what, patch, codes] of HOSTILE) {
      writeFileSync(join(root, "c.patch"), patch);
      const dest = join(root, "cand");
      const e = await materialise(cap, { id: "c@0", label: "c.patch", kind: "patch", path: join(root, "c.patch") }, dest).then(
        () => undefined,
        (x) => x,
      );
      expect(codes, what).toContain(e?.code);
      expect(existsSync(dest), what).toBe(false);
      // the command line refuses what is wrong with the patch itself (names need the capture: materialise), as that candidate's record (nu7 #3)
      if (!/quoted|header-only/.test(what)) expect(refused(() => parseCandidate(join(root, "c.patch"))).code, what).toBe("E_PATCH");
    }
  });

  test("what git diff (inside src/ and from the capture folder) and diff -ru write applies: edits, new files, empty new files, timestamps, no newline at the end", async () => {
    const cap = await capture();
    writeFileSync(join(cap, "src/util.h"), "int a;\nint b;\n");
    const patches = [
      "diff --git a/src/util.h b/src/util.h\nindex dc904e7..5331e8e 100644\n--- a/src/util.h\n+++ b/src/util.h\n@@ -1,2 +1,2 @@\n int a;\n-int b;\n+int c;\ndiff --git a/src/empty.h b/src/empty.h\nnew file mode 100644\nindex 0000000..e69de29\ndiff --git a/src/n.h b/src/n.h\nnew file mode 100644\nindex 0000000..975fbec\n--- /dev/null\n+++ b/src/n.h\n@@ -0,0 +1 @@\n+y\n",
      'diff --git a/util.h "b/util.h"\nindex dc904e7..5331e8e 100644\n--- a/util.h\n+++ "b/util.h"\n@@ -1,2 +1,2 @@\n int a;\n-int b;\n+int c;\ndiff --git a/empty.h b/empty.h\nnew file mode 100644\nindex 0000000..e69de29\n',
      "diff -ruN src/util.h edited/util.h\n--- src/util.h\t2026-12-03 15:34:32.622132866 +0000\n+++ edited/util.h\t2026-12-03 15:34:32.622132866 +0000\n@@ -1,2 +1,2 @@\n int a;\n-int b;\n+int c;\ndiff -ruN src/n.h edited/n.h\n--- src/n.h\t1970-01-01 00:00:00.000000000 +0000\n+++ edited/n.h\t2026-12-03 15:34:32.622132866 +0000\n@@ -0,0 +1 @@\n+y\n\\ No newline at end of file\n",
      // a ctime date after a tab (diff -c's and older diff -u's form): git and kerncap both end the name at the tab
      "--- src/util.h\tThu Jan  1 00:00:00 1970\n+++ edited/util.h\tThu Dec  3 15:34:32 2026\n@@ -1,2 +1,2 @@\n int a;\n-int b;\n+int c;\n",
    ];
    const root = tempDir();
    for (const [k, patch] of patches.entries()) {
      expect(patchModeProblem(patch), `patch ${k}`).toBeUndefined();
      const w = writeCandidates(cap, [{ name: "c", patch }]);
      expect(JSON.parse(readFileSync(join(w.folder, "candidates.json"), "utf8")).candidates, `patch ${k}`).toMatchObject([
        { label: "c", spec: join(w.folder, "0.patch") },
      ]);
      writeFileSync(join(root, "c.patch"), patch);
      const dest = join(root, `cand${k}`);
      await materialise(cap, { id: "c@0", label: "c.patch", kind: "patch", path: join(root, "c.patch") }, dest);
      expect(readFileSync(join(dest, "src/util.h"), "utf8")).toBe("int a;\nint c;\n");
      expect(readdirSync(join(dest, "src")).sort()).toEqual(
        k === 1
          ? ["empty.h", "kernel.cu", "util.h"]
          : k === 0
            ? ["empty.h", "kernel.cu", "n.h", "util.h"]
            : k === 3
              ? ["kernel.cu", "util.h"]
              : ["kernel.cu", "n.h", "util.h"],
      );
    }
  });
});

describe("git apply's environment", () => {
  const CC = Bun.which("gcc") ?? Bun.which("cc");
  test.skipIf(!CC)(
    "an empty LD_LIBRARY_PATH entry (the working folder: the candidate's copy of src/) loads no library of the capture into git (adversary 80 #22)",
    async () => {
      const cap = await capture();
      const root = tempDir();
      const marker = join(root, "library-ran");
      writeFileSync(
        join(root, "lib.c"),
        `#include <stdio.h>\n__attribute__((constructor)) static void ran(void) { FILE* f = fopen(${JSON.stringify(marker)}, "w"); if (f) fclose(f); }\n`,
      );
      // every library git links, by the names the loader looks for
      for (const name of ["libpcre2-8.so.0", "libz.so.1"]) {
        const r = Bun.spawnSync([CC!, "-shared", "-fPIC", "-o", join(cap, "src", name), join(root, "lib.c")], { stderr: "pipe" });
        expect(r.exitCode, r.stderr.toString()).toBe(0);
      }
      writeFileSync(
        join(root, "c.patch"),
        "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n+__global__ void scale(float* x, int n) { x[0] *= 3.0f; }\n",
      );
      const saved = process.env.LD_LIBRARY_PATH;
      process.env.LD_LIBRARY_PATH = "/nonexistent-kerncap-lib:";
      try {
        await materialise(cap, { id: "c@0", label: "c.patch", kind: "patch", path: join(root, "c.patch") }, join(root, "cand")).catch(() => undefined);
      } finally {
        if (saved === undefined) delete process.env.LD_LIBRARY_PATH;
        else process.env.LD_LIBRARY_PATH = saved;
      }
      expect(existsSync(marker)).toBe(false);
    },
    60_000,
  );
});
