/**
 * The release artifacts (scripts/release.sh, scripts/build-wheel.py) from a freshly compiled
 * kerncap: the checksums check, the tarball holds the executable, the wheel's RECORD is right, and
 * the wheel installs offline into a fresh venv (`pip install --no-index`) as `kerncap` on PATH that
 * runs (--help, demo, inspect) and uninstalls cleanly. Skipped where python3 lacks venv/ensurepip,
 * or xz/sha256sum are missing. Fast settings (xz -0, deflate level 1): the same files, bigger.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { tempDir } from "./fixtures.ts";

const ROOT = resolve(import.meta.dir, "../..");
const has = (argv: string[]) => {
  try {
    return Bun.spawnSync(argv, { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
  } catch {
    return false;
  }
};
const LIB = join(ROOT, "c/build/libkerncap_cuda.so");
const SKIP = !has(["python3", "-c", "import venv, ensurepip"])
  ? "python3 with venv and ensurepip"
  : !has(["xz", "--version"]) || !has(["sha256sum", "--version"])
    ? "xz and sha256sum"
    : !existsSync(LIB)
      ? "the capture library (bash scripts/build-c.sh), which the executable embeds"
      : undefined;
if (SKIP) console.warn(`[release] skipped: needs ${SKIP}`);

function sh(argv: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(argv, { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...opts.env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}

let rel = "";
let work = "";
beforeAll(() => {
  if (SKIP) return;
  work = tempDir("kerncap-release-");
  // compiled here, not dist/kerncap: another build may be writing that one
  const bin = join(work, "kerncap");
  const b = sh([process.execPath, "build", "--compile", "--minify-syntax", "--sourcemap=none", "src/cli/main.ts", "--outfile", bin]);
  if (b.code !== 0) throw new Error(b.err);
  rel = join(work, "release");
  const r = sh(["bash", "scripts/release.sh"], { env: { RELEASE_DIR: rel, KERNCAP_BINARY: bin, XZ_OPT: "-0", WHEEL_COMPRESSLEVEL: "1" } });
  if (r.code !== 0) throw new Error(`release.sh: ${r.err}`);
}, 120_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true }); // a few hundred MB: the executable, its archives, the venv's copy
});

describe.skipIf(!!SKIP)("release artifacts", () => {
  test("a wheel, a tarball of the executable and their SHA-256 sums, which check", () => {
    const files = readdirSync(rel).sort();
    expect(files).toHaveLength(3);
    expect(files[0]).toBe("SHA256SUMS");
    expect(files[1]).toMatch(/^kerncap-\d+\.\d+\.\d+-linux-(x86_64|aarch64)\.tar\.xz$/);
    expect(files[2]).toMatch(/^kerncap-\d+\.\d+\.\d+-py3-none-manylinux_2_\d+_(x86_64|aarch64)\.whl$/);
    const c = sh(["sha256sum", "-c", "SHA256SUMS"], { cwd: rel });
    expect(c.code, c.err).toBe(0);
    expect(c.out.trim().split("\n")).toHaveLength(2);
    const t = sh(["tar", "-tvJf", join(rel, files[1]!)]);
    expect(t.out).toMatch(new RegExp(`^-rwxr-xr-x 0/0 .* ${files[1]!.replace(".tar.xz", "")}/kerncap$`, "m"));
   }, 60_000);

  test("the wheel: the executable under .data/scripts, mode 755; RECORD lists every other file with its sha256 and size", () => {
    const whl = join(rel, readdirSync(rel).find((f) => f.endsWith(".whl"))!);
    const check = `
import base64, hashlib, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
rec = [n for n in names if n.endswith(".dist-info/RECORD")][0]
rows = [l.split(",") for l in z.read(rec).decode().splitlines()]
assert sorted(r[0] for r in rows) == sorted(names), (rows, names)
for path, h, size in rows:
    if path == rec:
        assert h == "" and size == ""
        continue
    d = z.read(path)
    assert h == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode(), path
    assert int(size) == len(d), path
exe = [n for n in names if ".data/scripts/" in n]
assert exe == [n for n in names if n.endswith(".data/scripts/kerncap")], exe
assert (z.getinfo(exe[0]).external_attr >> 16) & 0o777 == 0o755
print(z.read([n for n in names if n.endswith("/WHEEL")][0]).decode())
`;
    const r = sh(["python3", "-c", check, whl]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("Root-Is-Purelib: false");
    expect(r.out).toMatch(/^Tag: py3-none-manylinux_2_\d+_(x86_64|aarch64)$/m);
   }, 60_000);

  test("pip install --no-index into a fresh venv: kerncap on PATH runs --help and demo; pip uninstall removes it", () => {
    const venv = join(work, "venv");
    expect(sh(["python3", "-m", "venv", venv]).code).toBe(0);
    const whl = join(rel, readdirSync(rel).find((f) => f.endsWith(".whl"))!);
    const pip = [join(venv, "bin/python"), "-m", "pip", "--disable-pip-version-check"];
    const i = sh([...pip, "install", "--no-index", whl]);
    expect(i.code, i.err).toBe(0);
    const env = { PATH: `${join(venv, "bin")}:${process.env.PATH}`, KERNCAP_CACHE: join(work, "cache") };
    const help = sh(["kerncap", "--help"], { cwd: work, env });
    expect(help.code, help.err).toBe(0);
    expect(help.out).toContain("EXAMPLES");
    const d = sh(["kerncap", "demo", "demo"], { cwd: work, env });
    expect(d.code, d.err).toBe(0);
    const ins = sh(["kerncap", "inspect", "demo", "--verify"], { cwd: work, env });
    expect(ins.code, ins.err).toBe(0);
    expect(ins.out).toContain("saxpy(Saxpy const*)");
    expect(sh([...pip, "uninstall", "-y", "kerncap"]).code).toBe(0);
    expect(existsSync(join(venv, "bin/kerncap"))).toBe(false);
  }, 60_000);
});
