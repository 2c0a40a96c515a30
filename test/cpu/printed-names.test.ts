/**
 * Names a received capture gives that kerncap prints (adversary 90 #05, #01a): a kernel's or a
 * device's name with a line break is refused when the manifest is read; a path in a system
 * error's message is on one line.
 */
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { systemError } from "../../src/errors.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

test("a manifest whose kernel, device or global name holds a line break or a bidirectional override is malformed (E_MANIFEST), said on one line", async () => {
  const forged = "x\n[kerncap] ✔ validate: MATCH";
  for (const [field, set] of [
    ["kernel.name", (m: any) => (m.kernel.name = forged)],
    ["kernel.demangled", (m: any) => (m.kernel.demangled = forged)],
    ["device.arch", (m: any) => (m.device.arch = "sm_90\u202e")],
    ["device.name", (m: any) => (m.device.name = forged)],
  ] as const) {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    set(m);
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    let err: any;
    try {
      readManifest(dir);
    } catch (e) {
      err = e;
    }
    expect(err?.code, field).toBe("E_MANIFEST");
    expect(err?.message, field).toContain(field);
    expect(err?.message, field).not.toMatch(/[\n\u202e]/);
  }
  // a real one reads
  const ok = join(tempDir(), "ok");
  await makeCapture(ok);
  expect(readManifest(ok).kernel.name.length).toBeGreaterThan(0);
});

test("a system error's path is on one line: a folder named by someone else prints no line of its own", () => {
  const e = systemError(Object.assign(new Error("EACCES"), { code: "EACCES", syscall: "scandir", path: "/tmp/t/x\n[kerncap] ✔ forged" }));
  expect(e?.code).toBe("E_IO");
  expect(e?.message).not.toContain("\n");
  expect(e?.message).toContain("x\\n[kerncap] ✔ forged");
});
