/**
 * The record of a slice's check (src/frontends/cuda/slice-checked.ts): validate's step before the
 * build checks that kerncap's slice is what kerncap makes from its TU (0.3–0.5 s for llm.c on the
 * GPU node); once it found none, the next validates take the sealed record in DIR/build instead,
 * while nothing it read changed. Whether the check ran again shows as the record written again
 * (a new file: its inode changes).
 */
import { describe, expect, spyOn, test } from "bun:test";
import { cpSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../../src/capture/demo.ts";
import { SLICE_CHECK_FILE } from "../../../../src/frontends/cuda/slice-checked.ts";
import { refreshSlice, sha256Text, sliceMetaOf } from "../../../../src/frontends/cuda/slice.ts";
import { log } from "../../../../src/log.ts";
import { tempDir } from "../../fixtures.ts";

function demo() {
  const { dir, manifest } = writeDemo(join(tempDir(), "cap"), false);
  const meta = sliceMetaOf(manifest)!;
  return { dir, meta, record: join(dir, SLICE_CHECK_FILE), slice: join(dir, "src", meta.slice), tu: join(dir, "src", meta.tu) };
}
const inode = (p: string) => statSync(p).ino;

describe("the record of a slice's check", () => {
  test("a check that found no problem is recorded, sealed for the folder, private; the next refresh takes it and does not check again", () => {
    const { dir, meta, record } = demo();
    expect(refreshSlice(dir, meta).action).toBe("fresh");
    const r = JSON.parse(readFileSync(record, "utf8"));
    expect(r.schema).toBe("kerncap.slice-check/1");
    expect(r.auth).toMatch(/^hmac-sha256:/);
    expect(Array.isArray(r.system)).toBe(true); // the toolchain's and system's header paths it asked about (the demo includes none)
    expect(statSync(record).mode & 0o077).toBe(0);
    const first = inode(record);
    expect(refreshSlice(dir, meta).action).toBe("fresh");
    expect(inode(record)).toBe(first); // taken, not written again
  });

  test("a copy of the folder (build/ kept, as tar or cp -a keep it) is checked again: the record is sealed for the folder it was made in", () => {
    const { dir, meta } = demo();
    expect(refreshSlice(dir, meta).action).toBe("fresh");
    const copy = join(tempDir(), "copy");
    cpSync(dir, copy, { recursive: true });
    const before = readFileSync(join(copy, SLICE_CHECK_FILE), "utf8");
    expect(refreshSlice(copy, meta).action).toBe("fresh");
    expect(readFileSync(join(copy, SLICE_CHECK_FILE), "utf8")).not.toBe(before); // sealed again, for the copy
  });

  test("a forged record (another key's seal) is not taken; a new project header is read: checked again", () => {
    const { dir, meta, record } = demo();
    refreshSlice(dir, meta);
    const r = JSON.parse(readFileSync(record, "utf8"));
    writeFileSync(record, JSON.stringify({ ...r, auth: `hmac-sha256:0000:${"0".repeat(64)}` }));
    const forged = inode(record);
    refreshSlice(dir, meta);
    expect(inode(record)).not.toBe(forged);
    const sealed = inode(record);
    writeFileSync(join(dir, "src", "extra.h"), "#define EXTRA 1\n");
    expect(refreshSlice(dir, meta).action).toBe("fresh");
    expect(inode(record)).not.toBe(sealed);
  });

  test("a slice written over with the stamps recomputed, a record in place: still found and replaced by kerncap's (adversary 43's slice)", () => {
    const { dir, meta, slice, tu } = demo();
    expect(refreshSlice(dir, meta).action).toBe("fresh");
    const made = readFileSync(slice, "utf8");
    const nl = made.indexOf("\n");
    const body = made.slice(nl + 1).replace("p->a", "p->a + 1.0f");
    writeFileSync(slice, `// kerncap slice of src/${meta.tu} sha256=${sha256Text(readFileSync(tu, "utf8"))} body=${sha256Text(body)}\n${body}`);
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      expect(refreshSlice(dir, meta).action).toBe("remade");
    } finally {
      spy.mockRestore();
    }
    expect(readFileSync(slice, "utf8")).toBe(made);
    expect(warned.join("\n")).toContain("is not what kerncap makes from it");
  });

  test.skipIf(!existsSync("/usr/include/stdio.h"))(
    "the system headers' facts a check found are taken by the next process (none read again) while the environment and every path are as they were",
    () => {
      const { dir } = demo();
      const child = (mode: string, env: Record<string, string> = {}) => {
        const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../fixtures/slice-facts-child.ts"), dir, mode], {
          env: { ...process.env, ...env },
          stdout: "pipe",
          stderr: "pipe",
        });
        expect(p.exitCode, p.stderr.toString()).toBe(0);
        return JSON.parse(p.stdout.toString()) as { action: string; read: number };
      };
      const first = child("look");
      expect(first.action).toBe("fresh");
      expect(first.read).toBeGreaterThan(0); // <stdio.h> read, and recorded with the check
      writeFileSync(join(dir, "src", "extra.h"), "#define EXTRA 1\n"); // a project header: the check runs again
      expect(child("refresh")).toEqual({ action: "fresh", read: 0 }); // with the facts of the process before
      expect(child("refresh", { CUDA_HOME: "/nonexistent-toolkit" }).read).toBeGreaterThan(0); // another toolchain's environment: read again
    },
  );
});
