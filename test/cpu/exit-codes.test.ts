/**
 * Exit codes and messages when the output, not the input, fails (src/cli/main.ts closedStdio and
 * the stderr watch, src/errors.ts systemError): a closed stdout or stderr, stderr on a full disk,
 * a full file system and a file-size limit while packing or unpacking. Each is exit 2 with its own
 * message; none is an internal error or blamed on the archive. Run as child processes (the
 * shell's redirections, ulimit, a small tmpfs in a user and mount namespace).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { packCapture } from "../../src/format/archive.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");

/** `script` run by bash, with a function `kerncap` that runs the CLI (exported: inner shells have it too); its stdout, stderr and exit code. */
function sh(script: string): { out: string; err: string; code: number } {
  const p = Bun.spawnSync(["bash", "-c", `kerncap() { "${process.execPath}" "${MAIN}" "$@"; }; export -f kerncap; ${script}`], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { out: p.stdout.toString(), err: p.stderr.toString(), code: p.exitCode ?? -1 };
}

async function packed(): Promise<{ root: string; dir: string; archive: string }> {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  return { root, dir, archive: (await packCapture(dir, join(root, "cap.zip"))).archive };
}

/** Whether this machine lets an unprivileged user mount a tmpfs in its own namespaces (util-linux unshare). */
const canMountTmpfs = Bun.which("unshare") !== null && Bun.spawnSync(["unshare", "-rm", "bash", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]).exitCode === 0;

describe("exit codes when the output fails", () => {
  test("an error on stderr names its code before its message, as --json's document and docs/errors.md do; the hint under it (nu9 #14)", () => {
    const gone = join(tempDir(), "nowhere");
    const r = sh(`kerncap inspect ${gone}`);
    expect(r.code).toBe(2);
    // the error line (`[kerncap]  ERROR  …` on a terminal, `[error] [kerncap] …` here)
    expect(r.err).toMatch(new RegExp(`^.*(?:ERROR|\\[error\\]).* E_NOT_CAPTURE: no such capture folder: ${gone}\\n`, "m"));
    const usage = sh(`kerncap inspect ${gone} --no-such-option`);
    expect(usage.err).toMatch(/^.*(?:ERROR|\[error\]).* E_USAGE: unknown option --no-such-option/m);
    // the document's message stays the message alone
    const doc = JSON.parse(sh(`kerncap inspect ${gone} --json`).out);
    expect(doc.error).toMatchObject({ code: "E_NOT_CAPTURE", message: `no such capture folder: ${gone}` });
  });

  test("stdout closed (>&-): exit 2, said on stderr; stdout to /dev/null is fine", () => {
    const r = sh(`kerncap --version >&-`);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain("E_STDOUT_CLOSED: stdout is closed"); // its code, as every error's (nu #7)
    expect(sh(`kerncap --version >/dev/null`).code).toBe(0);
  });

  test("a relative KERNCAP_CACHE: E_CACHE from every verb alike, before any work; doctor says it as one of its checks (nu #2: builds took it, doctor said they could not)", () => {
    const cap = join(tempDir(), "cap");
    makeCapture(cap);
    for (const verb of [`inspect ${cap}`, `validate ${cap} --build-only`, `eval ${cap} ${cap}/src --build-only`, `pack ${cap}`]) {
      const r = sh(`KERNCAP_CACHE=rel/cache kerncap ${verb} --json`);
      expect(r.code, verb).toBe(2);
      // an indented kerncap.error/1, or eval's one line of it (JSON Lines)
      const lines = r.out.trim().split("\n");
      const doc = JSON.parse(verb.startsWith("eval") ? lines.at(-1)! : r.out);
      expect(doc.error.code, verb).toBe("E_CACHE");
    }
    const d = sh(`KERNCAP_CACHE=rel/cache kerncap doctor --for build --json`);
    expect(d.out).toContain("KERNCAP_CACHE must be an absolute path");
  });

  test("stderr closed (2>&-): exit 2, said on stdout (as a JSON document under --json)", () => {
    const r = sh(`kerncap inspect /nonexistent 2>&-`);
    expect(r.code).toBe(2);
    expect(r.out).toContain("stderr is closed");
    const j = sh(`kerncap inspect /nonexistent --json 2>&-`);
    expect(j.code).toBe(2);
    expect(JSON.parse(j.out).error.code).toBe("E_STDERR_CLOSED");
  });

  test("stderr on a full disk (2>/dev/full): exit 2 (its messages were lost), said on stdout; not 1, a mismatch's code", () => {
    const r = sh(`kerncap inspect /nonexistent 2>/dev/full`);
    expect(r.code).toBe(2);
    expect(r.out).toContain("cannot write its messages to stderr");
  });

  test("a file-size limit (ulimit -f, EFBIG) while unpacking and packing: exit 2 naming the file and the limit, nothing left", async () => {
    const { root, dir, archive } = await packed();
    for (const [cmd, file] of [
      [`unpack "${archive}" -o "${root}/out"`, `${root}/out/memory/`],
      [`pack "${dir}" -o "${root}/again.zip"`, `${root}/again.zip`],
    ]) {
      const r = sh(`ulimit -f 32; kerncap ${cmd}`);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain(`file too large while writing ${file}`);
      expect(r.err).toContain("ulimit -f");
      expect(r.err).not.toMatch(/internal error|kerncap bug|archive is damaged/);
    }
    expect(readdirSync(root).sort()).toEqual(["cap", "cap.zip"]);
  });

  test.skipIf(!canMountTmpfs)(
    "no space left (a 64 KiB tmpfs): unpack refuses before it writes, pack meets ENOSPC; exit 2, the output's fault, not the archive's",
    async () => {
      const { root, dir, archive } = await packed();
      const small = join(root, "small");
      mkdirSync(small);
      const r = sh(
        `unshare -rm bash -c 'mount -t tmpfs -o size=64k tmpfs "${small}" && { kerncap unpack "${archive}" -o "${small}/out"; echo "unpack $?"; kerncap pack "${dir}" -o "${small}/x.zip"; echo "pack $?"; ls -A "${small}"; }'`,
      );
      expect(r.out.split("\n").slice(0, 2)).toEqual(["unpack 2", "pack 2"]);
      expect(r.out.split("\n").slice(2).join("")).toBe(""); // nothing left on the full file system
      expect(r.err).toContain(`the file system of ${small}/out has 0.00 GiB free, and unpack leaves 1.00 GiB of it free`); // said before a byte is written
      expect(r.err).toContain(`no space left on device while writing ${small}/x.zip; free space or choose another --out`);
      expect(r.err).not.toMatch(/internal error|archive is damaged|does not inflate/);
      expect(existsSync(join(small, "out"))).toBe(false);
    },
  );
});
