/**
 * The Triton frontend's `kerncap doctor` checks (Frontend.doctor): python3 and the versions of
 * the triton and torch packages it sees, read through importlib.metadata (nothing is imported).
 */
import type { DoctorCheck } from "../frontend.ts";
import { whichAbsolute } from "../../env.ts";

/**
 * Run `argv` to its end (at most `timeoutMs`) in `/`: `python3 -c` puts its working folder first
 * on the module path, and a `json.py` another user left in /tmp or a team folder ran as the user
 * (a trial); `/` is root's alone. A program that cannot start is exit -1 with its error.
 */
function sh(argv: string[], timeoutMs: number, env: Record<string, string | undefined>): { code: number; out: string; err: string } {
  try {
    const p = Bun.spawnSync(argv, { cwd: "/", stdout: "pipe", stderr: "pipe", timeout: timeoutMs, env: env as Record<string, string> });
    return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
  } catch (e) {
    return { code: -1, out: "", err: (e as Error).message };
  }
}

/** python3 and the versions of triton and torch (importlib.metadata: nothing is imported). */
export function checkPython(env: Record<string, string | undefined>): DoctorCheck[] {
  const py = whichAbsolute("python3", env.PATH);
  if (!py)
    return [{ id: "python", status: "warn", detail: "python3 not found", fix: "Only Triton/PyTorch captures need it (the Triton reproducer runs repro.py)." }];
  const code =
    "import json,sys\nfrom importlib import metadata\nd={'python':sys.version.split()[0]}\nfor p in ('triton','torch'):\n  try: d[p]=metadata.version(p)\n  except Exception: d[p]=None\nprint(json.dumps(d))";
  const r = sh([py, "-c", code], 20_000, env);
  let v: Record<string, string | null> = {};
  try {
    v = JSON.parse(r.out.trim().split("\n").pop() ?? "");
  } catch {
    return [
      {
        id: "python",
        status: "warn",
        detail: `${py} did not run (exit ${r.code}): ${r.err.trim().split("\n").pop() ?? ""}`,
        fix: "Check the Python installation.",
      },
    ];
  }
  const opt = (name: string, what: string): DoctorCheck =>
    v[name] ? { id: name, status: "ok", detail: `${name} ${v[name]}` } : { id: name, status: "skip", detail: `not installed (optional: ${what})` };
  return [
    { id: "python", status: "ok", detail: `${py}: Python ${v.python}` },
    opt("triton", "Triton kernels and their reproducers"),
    opt("torch", "PyTorch apps"),
  ];
}
