/**
 * Names and files another local user plants where kerncap reads (adversary 68): a FIFO or a link
 * to /dev/zero at a destination's kerncap.json (replaceableKind read it by name, blocking and
 * unbounded: unpack and demo hung, or grew to 6 GiB), a folder name that is not UTF-8 (Bun reads
 * it as another name: `check` called the capture a dangling link, an argument named another
 * folder).
 */
import { expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { discoverCaptures } from "../../src/check/discover.ts";
import { assertNotNested, assertReplaceable, replaceableKind } from "../../src/format/capture-dir.ts";
import { refuseNotUtf8Arguments } from "../../src/cli/args.ts";
import { KerncapError } from "../../src/errors.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");

test("a destination whose kerncap.json is a FIFO or a link to /dev/zero is no capture: refused at once (E_EXISTS), never read", () => {
  const d = tempDir();
  mkdirSync(join(d, "fifo"));
  execFileSync("mkfifo", [join(d, "fifo", "kerncap.json")]);
  mkdirSync(join(d, "zero"));
  symlinkSync("/dev/zero", join(d, "zero", "kerncap.json"));
  mkdirSync(join(d, "set"));
  execFileSync("mkfifo", [join(d, "set", "kerncap-captures.json")]);
  for (const dest of ["fifo", "zero", "set"]) {
    const t0 = performance.now();
    expect(replaceableKind(join(d, dest)), dest).toBe(false);
    let err: unknown;
    try {
      assertReplaceable(join(d, dest), true);
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code, dest).toBe("E_EXISTS");
    expect(performance.now() - t0).toBeLessThan(2000);
  }
  // a link to a capture is not followed either: --force replaces no folder through a link
  const cap = join(d, "cap");
  mkdirSync(cap);
  writeFileSync(join(cap, "kerncap.json"), JSON.stringify({ format: "kerncap-capture" }));
  symlinkSync(cap, join(d, "link"));
  expect(replaceableKind(join(d, "link"))).toBe(false);
});

test("a capture folder whose name is not UTF-8 is passed over by check's walk, said so (it was called a dangling symbolic link)", async () => {
  const d = tempDir();
  await makeCapture(join(d, "plain"));
  execFileSync("sh", ["-c", `mv "$0/plain" "$0/$(printf 'c\\377odd')"`, d]); // a name only bytes can give
  await makeCapture(join(d, "fine"));
  const found = await discoverCaptures([d]);
  expect(found.captures.map((c) => c.id)).toEqual([`${d.split("/").at(-1)}/fine`]);
  const over = found.passedOver.find((p) => p.reason.includes("not UTF-8"));
  expect(over?.path).toBe(join(d, "c\u00ffodd"));
  expect(over?.warn).toBe(true);
  expect(found.passedOver.some((p) => p.reason.includes("dangling"))).toBe(false);
});

test("an argument that is not UTF-8 is refused (E_USAGE, exit 2) naming its bytes; it named another folder (U+FFFD)", () => {
  const d = tempDir();
  const p = Bun.spawnSync(["sh", "-c", `exec "$0" "$1" validate "$(printf '${d}/c\\377odd')" --build-only --json`, process.execPath, MAIN], {
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(2);
  const doc = JSON.parse(p.stdout.toString());
  expect(doc.error.code).toBe("E_USAGE");
  expect(doc.error.message).toContain("c\\xffodd) is not UTF-8");
  // the bytes come from /proc/self/cmdline: a stand-in with valid UTF-8 (U+FFFD itself included) passes, the verb's words numbered from 1
  const ok = join(d, "cmdline-ok");
  writeFileSync(ok, Buffer.from("kerncap\0inspect\0c\u00e9\ufffd\0"));
  refuseNotUtf8Arguments(2, ok);
  const bad = join(d, "cmdline-bad");
  writeFileSync(bad, Buffer.concat([Buffer.from("bun\0main.ts\0inspect\0c"), Buffer.from([0xc3, 0x28]), Buffer.from("\0")]));
  expect(() => refuseNotUtf8Arguments(2, bad)).toThrow(/argument 2 \(c\\xc3\(\) is not UTF-8/);
});

test("check of a folder inside a capture (cap/src) is E_NESTED_CAPTURE naming the capture, as every verb says it (it was 'no captures under cap/src')", async () => {
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"), { recursive: true });
  let err: unknown;
  try {
    await discoverCaptures([join(cap, "src")]);
  } catch (e) {
    err = e;
  }
  expect((err as KerncapError).code).toBe("E_NESTED_CAPTURE");
  expect((err as KerncapError).message).toContain(`lies inside the capture`);
  expect((err as KerncapError).hint).toContain("Give the capture folder itself");
});

test("a new capture's folder inside a capture (demo, unpack -o, run --out): the hint names only a folder outside, never the capture itself, which would be overwritten (nu #9)", async () => {
  const d = tempDir();
  const cap = join(d, "cap");
  await makeCapture(cap);
  const e = (() => {
    try {
      assertNotNested(join(cap, "newdemo"), { output: true });
    } catch (x) {
      return x as KerncapError;
    }
  })();
  expect(e?.code).toBe("E_NESTED_CAPTURE");
  expect(e?.hint).toContain("outside every capture");
  expect(e?.hint).not.toContain("Give the capture folder itself");
  const demo = Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../../src/cli/main.ts"), "demo", join(cap, "newdemo")], { stderr: "pipe" });
  expect(demo.exitCode).toBe(2);
  expect(demo.stderr.toString()).toContain("Write it to a folder outside every capture");
});

test.skipIf(process.getuid?.() !== 0)(
  "an eval candidate named through another user's link (in a sticky folder, or a folder of theirs): refused, the file it reaches never read (adversary 79 #04)",
  async () => {
    const { chmodSync, lchownSync, chownSync } = await import("node:fs");
    const { parseCandidate } = await import("../../src/eval/candidates.ts");
    const d = tempDir();
    const mine = join(d, "mine");
    mkdirSync(mine, { mode: 0o700 });
    writeFileSync(join(mine, "saxpy.cu"), "// SECRET_TOKEN\n");
    const sticky = join(d, "shared");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    symlinkSync(mine, join(sticky, "lnk"));
    lchownSync(join(sticky, "lnk"), 65534, 65534); // nobody's link
    const theirs = join(d, "theirs");
    mkdirSync(theirs);
    symlinkSync(mine, join(theirs, "lnk"));
    lchownSync(join(theirs, "lnk"), 65534, 65534);
    chownSync(theirs, 65534, 65534);
    for (const via of [join(sticky, "lnk"), join(theirs, "lnk")]) {
      let err: unknown;
      try {
        parseCandidate(join(via, "saxpy.cu"));
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code, via).toBe("E_UNSAFE_PATH");
      expect((err as KerncapError).message).toContain("what kerncap reads as the candidate");
    }
    // the user's own link, and the folder by its own path: read
    symlinkSync(mine, join(d, "own"));
    expect(parseCandidate(join(d, "own", "saxpy.cu")).kind).toBe("file");
    expect(parseCandidate(join(mine, "saxpy.cu")).kind).toBe("file");
  },
);
