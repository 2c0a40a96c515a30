/**
 * kerncap pack / unpack (src/format/archive.ts) on synthetic captures: bit-exact round trip,
 * holes kept, checksums verify after unpack, zip-slip, damage and overwrite refusals.
 */
import { describe, expect, test } from "bun:test";
import { runCommand } from "citty";
import { zipSync, strToU8 } from "fflate";
import { closeSync, existsSync, ftruncateSync, openSync, readdirSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { commands } from "../../src/cli/main.ts";
import { KerncapError } from "../../src/errors.ts";
import { packCapture, PACK_INDEX, portabilityWarnings, readPackIndex, unpackArchive } from "../../src/format/archive.ts";
import { readManifest, verifyRegions } from "../../src/format/capture-dir.ts";
import { dataExtents } from "../../src/format/sparse-extents.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

async function fresh(): Promise<{ root: string; dir: string }> {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  return { root, dir };
}

function error(fn: () => unknown): KerncapError {
  try {
    fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("did not throw");
}

/** Every file under dir: relative path → bytes. */
function tree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const go = (rel: string) => {
    for (const n of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${n.name}` : n.name;
      if (n.isDirectory()) go(r);
      else out.set(r, readFileSync(join(dir, r)));
    }
  };
  go("");
  return out;
}

describe("pack / unpack", () => {
  test("round trip: every file bit-exact, modes kept, checksums verify (inspect --verify)", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\necho build/kernel.cubin\n", { mode: 0o755 });
    const p = packCapture(dir, join(root, "cap.zip"));
    expect(p.files).toBe(6);
    const u = unpackArchive(p.archive, join(root, "back"));
    const a = tree(dir);
    const b = tree(u.dir);
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
    for (const [k, v] of a) expect(Buffer.compare(b.get(k)!, v), k).toBe(0);
    expect(statSync(join(u.dir, "build.sh")).mode & 0o777).toBe(0o755);
    verifyRegions(u.dir, readManifest(u.dir)); // every region's SHA-256
    const r = await runCommand(await commands.inspect(), { rawArgs: [u.dir, "--verify"] });
    expect(r.result).toBe(0);
  });

  test("a 1 GiB file with 4 MiB of data: a ~4 MiB archive, unpacked sparse, same bytes", async () => {
    const { root, dir } = await fresh();
    const big = join(dir, "memory/big.bin");
    const fd = openSync(big, "w");
    ftruncateSync(fd, 1 << 30);
    const data = new Uint8Array(1 << 20).map((_, i) => (i * 31 + 7) & 0xff);
    const offs = [0, 256 << 20, 700 << 20, (1 << 30) - (1 << 20)];
    for (const o of offs) writeSync(fd, data, 0, data.length, o);
    closeSync(fd);
    if (!dataExtents(big).sparse) return; // a file system without holes: nothing to measure
    const p = packCapture(dir, join(root, "cap.zip"));
    expect(p.sparseFiles).toBe(1);
    expect(statSync(p.archive).size).toBeLessThan(5 << 20);
    const u = unpackArchive(p.archive, join(root, "back"));
    const st = statSync(join(u.dir, "memory/big.bin"));
    expect(st.size).toBe(1 << 30);
    expect(st.blocks * 512).toBeLessThan(8 << 20); // holes stayed holes
    expect(dataExtents(join(u.dir, "memory/big.bin")).extents).toEqual(dataExtents(big).extents);
    const back = openSync(join(u.dir, "memory/big.bin"), "r");
    try {
      for (const o of [...offs, 100 << 20]) {
        const got = new Uint8Array(data.length);
        require("node:fs").readSync(back, got, 0, got.length, o);
        expect(Buffer.compare(got, o === 100 << 20 ? new Uint8Array(data.length) : data)).toBe(0);
      }
    } finally {
      closeSync(back);
    }
  });

  test("the archive's index lists every file; the default target is the packed folder's name", async () => {
    const { root, dir } = await fresh();
    const p = packCapture(dir, join(root, "x.zip"));
    const idx = readPackIndex(p.archive);
    expect(idx.root).toBe("cap");
    expect(idx.files.map((f) => f.path)).toContain("kerncap.json");
    const cwd = process.cwd();
    const other = tempDir();
    process.chdir(other);
    try {
      expect(unpackArchive(p.archive, undefined).dir).toBe(join(other, "cap"));
    } finally {
      process.chdir(cwd);
    }
  });

  test("refuses to overwrite without --force; --force replaces only a capture", async () => {
    const { root, dir } = await fresh();
    const p = packCapture(dir, join(root, "cap.zip"));
    expect(error(() => packCapture(dir, p.archive)).code).toBe("E_EXISTS");
    packCapture(dir, p.archive, { force: true });
    expect(error(() => unpackArchive(p.archive, dir)).code).toBe("E_EXISTS");
    unpackArchive(p.archive, dir, { force: true });
    const notes = tempDir();
    writeFileSync(join(notes, "mine.txt"), "keep");
    expect(error(() => unpackArchive(p.archive, notes, { force: true })).message).toContain("not a kerncap capture");
    expect(readFileSync(join(notes, "mine.txt"), "utf8")).toBe("keep");
  });

  test("zip-slip: an entry outside the folder is refused and nothing is written", async () => {
    const root = tempDir();
    const idx = { schema: "kerncap.pack/1", root: "cap", tool: "x", dirs: [], warnings: [], files: [{ path: "../evil.txt", size: 4, mode: 0o644, entry: "cap/../evil.txt", method: "deflated" }] };
    const zip = zipSync({ [`cap/${PACK_INDEX}`]: strToU8(JSON.stringify(idx)), "cap/../evil.txt": strToU8("evil") });
    writeFileSync(join(root, "evil.zip"), zip);
    const e = error(() => unpackArchive(join(root, "evil.zip"), join(root, "out")));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain("outside the capture folder");
    expect(existsSync(join(root, "evil.txt"))).toBe(false);
    expect(readdirSync(root)).toEqual(["evil.zip"]);
    // an entry the index does not list
    const zip2 = zipSync({ [`cap/${PACK_INDEX}`]: strToU8(JSON.stringify({ ...idx, files: [] })), "/etc/x": strToU8("x") });
    writeFileSync(join(root, "evil2.zip"), zip2);
    expect(error(() => unpackArchive(join(root, "evil2.zip"), join(root, "out"))).message).toContain("is not in");
  });

  test("a damaged archive: CRC or truncation named; no folder left behind", async () => {
    const { root, dir } = await fresh();
    const p = packCapture(dir, join(root, "cap.zip"));
    const b = readFileSync(p.archive);
    const at = b.indexOf(Buffer.from(readFileSync(join(dir, "memory/before.bin")).subarray(100, 132)));
    expect(at).toBeGreaterThan(0);
    b[at] ^= 0xff;
    writeFileSync(join(root, "bad.zip"), b);
    const e = error(() => unpackArchive(join(root, "bad.zip"), join(root, "out")));
    expect(e.message).toContain("CRC-32 mismatch in cap/memory/before.bin");
    expect(existsSync(join(root, "out"))).toBe(false);
    expect(readdirSync(root).filter((n) => n.includes(".tmp-"))).toEqual([]);
    writeFileSync(join(root, "short.zip"), b.subarray(0, b.length >> 1));
    expect(error(() => unpackArchive(join(root, "short.zip"), join(root, "out"))).code).toBe("E_ARCHIVE");
  });

  test("a damaged capture is not packed", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "kernel/params.bin"), new Uint8Array(12).fill(1));
    expect(error(() => packCapture(dir, join(root, "cap.zip"))).code).toBe("E_CHECKSUM");
    expect(existsSync(join(root, "cap.zip"))).toBe(false);
  });

  test("inspect, replay and validate given an archive say how to unpack it", async () => {
    const { root, dir } = await fresh();
    const p = packCapture(dir, join(root, "cap.zip"));
    for (const v of ["inspect", "replay", "validate"] as const) {
      let e: unknown;
      try {
        await runCommand(await commands[v](), { rawArgs: [p.archive] });
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).hint, v).toContain("kerncap unpack");
    }
  });

  test("absolute paths in build.sh and overlay mode are reported as not portable", async () => {
    const { dir } = await fresh();
    writeFileSync(join(dir, "build.sh"), `#!/usr/bin/env bash\nhere=x\n"$nvcc" -I/home/me/proj/include -isystem /usr/local/cuda/include -I"$here/src" "${dir}/src/k.cu"\n`);
    const m = readManifest(dir);
    m.source = { cuda: { mode: "overlay", projectRoot: "/home/me/proj", referencedOutsideRoot: [] } };
    const w = portabilityWarnings(dir, m);
    expect(w.join("\n")).toContain("overlay mode");
    expect(w.join("\n")).toContain("/home/me/proj/include");
    expect(w.join("\n")).not.toContain("/usr/local/cuda");
    expect(w.join("\n")).not.toContain(dir);
  });
});
