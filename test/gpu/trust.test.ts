/**
 * The trust model on a GPU (docs/security.md): a real CUDA reproducer (test/apps/multi_kernels,
 * sliced) validated confined (`validate --confine`, what kerncap mcp runs: the compiler's own
 * dependency list through EXTRA_FLAGS, build.sh only) still matches; an edit that includes a file
 * outside the capture is refused without its content; a build.sh changed after capture is refused
 * by a confined validate (E_NOT_RENDERED); the same capture packed and unpacked is
 * received: validate prints build.sh and refuses until --trust, which is then remembered;
 * --trust=DIGEST runs the digest shown and refuses a changed build.sh; a capture folder renamed
 * `cap$(id>X)` validates with its stock build.sh and runs nothing.
 *
 * Only bun:test, node:* and ./harness.ts imports; drives $KERNCAP_BIN. Skips without a GPU, the
 * kerncap binary or nvcc.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const SKIP = !!skipReason("trust gpu tests", [[!NVCC, "no nvcc"]]);
const WORK = workDir("kerncap-trust-gpu-");
const SECRET = "TOPSECRET_hunter2";
// the trust record of this suite's own
const ENV = { XDG_STATE_HOME: join(WORK, "state") };
const kc = (args: string[]) => kerncap(WORK, args, ENV);

describe.skipIf(SKIP)("trust and confinement on a real reproducer", () => {
  test("validate --confine matches; an #include of a file outside is E_CONFINED without its content; a received copy needs --trust once", () => {
    const bin = join(WORK, "multi");
    const b = run([NVCC!, "-O2", "-lineinfo", "-arch=sm_90", "-o", bin, join(APPS, "multi_kernels/main.cu")], { cwd: WORK });
    expect(b.code, b.stderr).toBe(0);
    const out = join(WORK, "cap");
    const cap = kc(["run", "--kernel", "checked_copy", "--out", out, "--", bin]);
    expect(cap.code, cap.stderr).toBe(0);

    const v = kc(["validate", out, "--confine", "--json"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    expect(json(v).verdict).toBe("match");
    expect(json(v).rebuild.builder).toBe("build.sh");
    expect(readFileSync(join(out, "build/kerncap-deps.d"), "utf8")).toContain("main.cu");
    // the build kerncap wrote is recorded at capture: a changed build.sh is refused before it runs
    const script = readFileSync(join(out, "build.sh"), "utf8");
    writeFileSync(join(out, "build.sh"), `${script}# changed\n`);
    const changed = kc(["validate", out, "--confine", "--json"]);
    expect(changed.code).toBe(2);
    expect(json(changed).error.code).toBe("E_NOT_RENDERED");
    writeFileSync(join(out, "build.sh"), script);

    writeFileSync(join(WORK, "secret"), `${SECRET} is the password\n`);
    const tu = join(out, "src/main.cu");
    const text = readFileSync(tu, "utf8");
    writeFileSync(tu, `#include "${join(WORK, "secret")}"\n${text}`);
    const c = kc(["validate", out, "--confine", "--json"]);
    expect(c.code).toBe(2);
    expect(json(c).error.code).toBe("E_CONFINED");
    expect(c.stdout + c.stderr).not.toContain(SECRET);
    writeFileSync(tu, text);

    const zip = join(WORK, "cap.zip");
    expect(kc(["pack", out, "-o", zip]).code).toBe(0);
    const got = join(WORK, "got");
    expect(kc(["unpack", zip, "-o", got]).code).toBe(0);
    const refused = kc(["validate", got, "--json"]);
    expect(refused.code).toBe(2);
    expect(json(refused).error.code).toBe("E_UNTRUSTED");
    expect(refused.stderr).toContain("kerncap's own build.sh, not printed: its template's text, its compile flags"); // one line, not its ~140
    const trusted = kc(["validate", got, "--trust", "--json"]);
    expect(trusted.code, trusted.stderr).toBe(0);
    expect(json(trusted).verdict).toBe("match");
    const again = kc(["validate", got, "--json"]);
    expect(again.code, again.stderr).toBe(0);

    // --trust=DIGEST on a real reproducer: the digest the refusal showed runs (from a private copy); a changed build.sh is refused
    const got2 = join(WORK, "got2");
    expect(kc(["unpack", zip, "-o", got2]).code).toBe(0);
    const shown = kc(["validate", got2, "--json"]);
    const digest = /sha256 ([0-9a-f]{64})/.exec(json(shown).error.message)?.[1];
    expect(digest, json(shown).error.message).toBeDefined();
    const byDigest = kc(["validate", got2, `--trust=${digest}`, "--json"]);
    expect(byDigest.code, byDigest.stderr).toBe(0);
    expect(json(byDigest).verdict).toBe("match");
    writeFileSync(join(got2, "build.sh"), readFileSync(join(got2, "build.sh"), "utf8") + "touch changed\n");
    const altered = kc(["validate", got2, `--trust=${digest}`, "--json"]);
    expect(altered.code).toBe(2);
    expect(json(altered).error.code).toBe("E_TRUST_CHANGED");
    expect(existsSync(join(got2, "changed"))).toBe(false);

    // a capture folder renamed cap$(id>X) (a rename keeps it made here: src/format/made-here.ts): its stock build.sh rebuilds it (nvcc runs its steps through sh) and runs nothing
    const odd = join(WORK, "cap$(id>X)");
    expect(run(["mv", out, odd], { cwd: WORK }).code).toBe(0);
    const o = kc(["validate", odd, "--json"]);
    expect(o.code, o.stderr + o.stdout).toBe(0);
    expect(json(o).verdict).toBe("match");
    for (const d of [WORK, odd]) expect(existsSync(join(d, "X"))).toBe(false);
  }, 240_000);
});
