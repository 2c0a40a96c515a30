/**
 * The release artifacts (scripts/release.sh, scripts/build-wheel.py) from a freshly compiled
 * kerncap: the checksums check, the tarball holds the executable, the wheel's RECORD is right, and
 * the wheel installs offline into a fresh venv (`pip install --no-index`) as `kerncap` on PATH that
 * runs (--help, demo, inspect) and as `python -m kerncap`, and uninstalls cleanly; its tag is
 * manylinux2014 and no binary in it needs a newer glibc (read from the ELF: test/cpu/elf-needs.ts);
 * its metadata carries the licence, classifiers, project URLs and the README as description. Skipped where python3 lacks venv/ensurepip,
 * or xz/sha256sum are missing. Fast settings (xz -0, deflate level 1): the same files, bigger.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { elfNeeds, newestGlibcMinor } from "./elf-needs.ts";
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
const HSA = join(ROOT, "c/build/libkerncap_hsa.so");
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

const SOURCE = "https://example.org/kerncap";
// the executable's own settings, read from scripts/build.sh (one place): no bunfig.toml or .env of the working folder is loaded
const BUILD_FLAGS = readFileSync("scripts/build.sh", "utf8").match(/--no-compile-autoload-[a-z]+/g) ?? [];
let rel = "";
let work = "";
beforeAll(() => {
  if (SKIP) return;
  work = tempDir("kerncap-release-");
  // compiled here, not dist/kerncap: another build may be writing that one
  const bin = join(work, "kerncap");
  const b = sh([
    process.execPath,
    "build",
    "--compile",
    ...BUILD_FLAGS,
    "--minify-syntax",
    "--sourcemap=none",
    "src/cli/main.ts",
    ...(existsSync(HSA) ? [HSA] : []),
    "--outfile",
    bin,
  ]); // as scripts/build.sh embeds it
  if (b.code !== 0) throw new Error(b.err);
  rel = join(work, "release");
  const r = sh(["bash", "scripts/release.sh", "--project-url", `Source=${SOURCE}`], {
    env: { RELEASE_DIR: rel, KERNCAP_BINARY: bin, XZ_OPT: "-0", WHEEL_COMPRESSLEVEL: "1" },
  });
  if (r.code !== 0) throw new Error(`release.sh: ${r.err}`);
}, 120_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true }); // a few hundred MB: the executable, its archives, the venv's copy
});

describe.skipIf(!!SKIP)("release artifacts", () => {
  test("the executable loads no bunfig.toml (preload) and no .env from the folder it runs in: a received archive or another user's /tmp runs nothing in kerncap", () => {
    expect(BUILD_FLAGS).toEqual(expect.arrayContaining(["--no-compile-autoload-bunfig", "--no-compile-autoload-dotenv"]));
    const dir = join(work, "hostile-cwd");
    mkdirSync(dir, { recursive: true });
    const marker = join(work, "preload-ran");
    writeFileSync(join(dir, "notes.js"), `require("fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`);
    writeFileSync(join(dir, "bunfig.toml"), `preload = ["./notes.js"]\n`);
    writeFileSync(join(dir, ".env"), "KERNCAP_VERBOSE=1\n");
    const r = sh([join(work, "kerncap"), "inspect", "no-such-capture"], { cwd: dir });
    expect(r.code).toBe(2);
    expect(existsSync(marker)).toBe(false);
    expect(r.err).not.toMatch(/at (async )?runCli/); // .env's KERNCAP_VERBOSE=1 (a stack in the error) was not read
  }, 60_000);

  test("a wheel, a tarball of the executable and their SHA-256 sums, which check", () => {
    const files = readdirSync(rel).sort();
    expect(files).toHaveLength(3);
    expect(files[0]).toBe("SHA256SUMS");
    expect(files[1]).toMatch(/^kerncap-\d+\.\d+\.\d+-linux-(x86_64|aarch64)\.tar\.xz$/);
    expect(files[2]).toMatch(/^kerncap-\d+\.\d+\.\d+-py3-none-manylinux_2_17_(x86_64|aarch64)\.manylinux2014_\1\.whl$/);
    const c = sh(["sha256sum", "-c", "SHA256SUMS"], { cwd: rel });
    expect(c.code, c.err).toBe(0);
    expect(c.out.trim().split("\n")).toHaveLength(2);
    const t = sh(["tar", "-tvJf", join(rel, files[1]!)]);
    expect(t.out).toMatch(new RegExp(`^-rwxr-xr-x 0/0 .* ${files[1]!.replace(".tar.xz", "")}/kerncap$`, "m"));
    expect(t.out).toMatch(new RegExp(`^-rw-r--r-- 0/0 .* ${files[1]!.replace(".tar.xz", "")}/kerncap\\.1$`, "m"));
    expect(t.out).toMatch(new RegExp(`^-rw-r--r-- 0/0 .* ${files[1]!.replace(".tar.xz", "")}/LICENSE$`, "m"));
    // the docs the man page points at (trial 11: a release without a checkout had none)
    expect(t.out).toMatch(new RegExp(`^-rw-r--r-- 0/0 .* ${files[1]!.replace(".tar.xz", "")}/docs/security\\.md$`, "m"));
    expect(t.out).toMatch(new RegExp(`^-rw-r--r-- 0/0 .* ${files[1]!.replace(".tar.xz", "")}/README\\.md$`, "m"));
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
    expect(r.out).toMatch(/^Tag: py3-none-manylinux_2_17_(x86_64|aarch64)$/m);
    expect(r.out).toMatch(/^Tag: py3-none-manylinux2014_(x86_64|aarch64)$/m);
  }, 60_000);

  test("no binary in the release needs a glibc newer than the tag's 2.17: the executable and the libraries it embeds", () => {
    const bin = join(work, "kerncap");
    const libs = ["c/build/libkerncap_cuda.so", "c/build/libkerncap_hsa.so"].map((p) => join(ROOT, p)).filter(existsSync);
    const exe = readFileSync(bin);
    for (const path of [bin, ...libs]) {
      const bytes = readFileSync(path);
      expect(newestGlibcMinor(elfNeeds(bytes)), path).toBeLessThanOrEqual(17);
      // the libraries shipped are the ones embedded in the executable (byte for byte)
      if (path !== bin) expect(exe.indexOf(bytes.subarray(0, 4096)), path).toBeGreaterThan(0);
    }
  }, 60_000);

  test("the wheel's metadata: MIT licence and its file, classifiers, project URL, the README as description", () => {
    const whl = join(rel, readdirSync(rel).find((f) => f.endsWith(".whl"))!);
    const r = sh([
      "python3",
      "-c",
      "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.read([n for n in z.namelist() if n.endswith('.dist-info/METADATA')][0]).decode()); print('LICENSE-FILE' if any(n.endswith('.dist-info/LICENSE') for n in z.namelist()) else '')",
      whl,
    ]);
    expect(r.code, r.err).toBe(0);
    const [head, body] = [r.out.slice(0, r.out.indexOf("\n\n")), r.out.slice(r.out.indexOf("\n\n"))];
    expect(head).toMatch(/^License: MIT$/m);
    expect(head).toMatch(/^Classifier: License :: OSI Approved :: MIT License$/m);
    expect(head).toMatch(/^Classifier: Operating System :: POSIX :: Linux$/m);
    expect(head).toContain(`Project-URL: Source, ${SOURCE}`);
    expect(head).toMatch(/^Summary: .*GPU kernel/m);
    expect(body).toContain("# kerncap");
    expect(body).toContain("## Install");
    expect(body).not.toContain("scripts/quickstart.sh"); // the clone's build notes are not the description
    expect(body).toContain(`(${SOURCE}/blob/main/docs/verbs.md)`); // relative links made absolute
    expect(r.out).toContain("LICENSE-FILE");
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
    // python -m kerncap: the same executable, found beside the package and exec'ed
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
    const m = sh([join(venv, "bin/python"), "-m", "kerncap", "--version"], { cwd: work, env: { KERNCAP_CACHE: env.KERNCAP_CACHE } });
    expect(m.code, m.err).toBe(0);
    expect(m.out.trim()).toBe(version);
    const bad = sh([join(venv, "bin/python"), "-m", "kerncap", "inspect", join(work, "no-such-capture")], {
      cwd: work,
      env: { KERNCAP_CACHE: env.KERNCAP_CACHE },
    });
    expect(bad.code).toBe(2); // kerncap's own exit status comes through
    expect(readFileSync(join(venv, "share/man/man1/kerncap.1"), "utf8")).toBe(readFileSync(join(ROOT, "docs/kerncap.1"), "utf8")); // man -M venv/share/man kerncap
    // the manual the man page points at, with the wheel too (a new user's finding: a wheel install had no docs/)
    expect(readFileSync(join(venv, "share/doc/kerncap/verbs.md"), "utf8")).toBe(readFileSync(join(ROOT, "docs/verbs.md"), "utf8"));
    expect(sh([...pip, "uninstall", "-y", "kerncap"]).code).toBe(0);
    expect(existsSync(join(venv, "bin/kerncap"))).toBe(false);
    expect(sh([join(venv, "bin/python"), "-c", "import kerncap"]).code).not.toBe(0);
  }, 60_000);
});

// A project URL is named only where one is configured (package.json's homepage/repository/bugs, or
// --project-url): never a placeholder. This repository's package.json names none, so its wheels
// carry no Project-URL unless release.sh is given one.
test.skipIf(!has(["python3", "-c", "pass"]))("project URLs come only from package.json and --project-url", () => {
  const py = `import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bw", sys.argv[1]); bw = importlib.util.module_from_spec(spec); spec.loader.exec_module(bw)
print(json.dumps([bw.project_urls([]), bw.project_urls(["Docs=https://docs.invalid/k"])]))`;
  const r = sh(["python3", "-c", py, join(ROOT, "scripts/build-wheel.py")]);
  expect(r.code, r.err).toBe(0);
  const [none, given] = JSON.parse(r.out) as [string, string][][];
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const configured = ["homepage", "repository", "bugs"].map((k) => pkg[k]).filter(Boolean).length;
  expect(none.length).toBe(configured);
  for (const [, url] of none) expect(url).not.toMatch(/example\.(org|com)|placeholder|TODO/i);
  expect(given.at(-1)).toEqual(["Docs", "https://docs.invalid/k"]);
});

// --help prints the script's header and builds nothing; an argument build-wheel.py does not take is
// refused before anything is built (a user's `release.sh --help` rebuilt dist/kerncap, then failed).
test.skipIf(!has(["python3", "-c", "pass"]))("release.sh --help and an unknown argument: no build, exit 0 and 2", () => {
  const rel = tempDir("kerncap-release-args-");
  const env = { RELEASE_DIR: join(rel, "out"), KERNCAP_BINARY: join(rel, "no-such-kerncap") };
  const help = sh(["bash", "scripts/release.sh", "--help"], { env });
  expect(help.code).toBe(0);
  expect(help.out).toStartWith("The release artifacts, in dist/release/");
  const bad = sh(["bash", "scripts/release.sh", "--bogus"], { env });
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("unrecognized arguments: --bogus");
  expect(existsSync(join(rel, "out"))).toBe(false);
});
