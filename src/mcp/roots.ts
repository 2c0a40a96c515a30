/**
 * The MCP server's roots (`kerncap mcp --root DIR`, repeatable; default: the folder it started
 * in): every folder a tool is given (`dir`, evaluate's `inputs`) and every folder `run` writes
 * (`out`) lies under one of them, said before any child starts, so that the refusal is the same on
 * a machine with a GPU or without one. A path outside the roots gets one message whatever is there
 * (a file, a folder, nothing): an agent learns nothing of what exists outside.
 */
import { lstatSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { CAPTURE_SET_FILE, readCaptureSet } from "../format/capture-set.ts";
import { nestedCaptureError, outerCapture } from "../format/capture-dir.ts";
import { MANIFEST_FILE } from "../format/manifest.ts";
import { captureSetMember } from "../format/paths.ts";
import { KerncapError } from "../errors.ts";
import { sharedParentRisk } from "../cache.ts";
import { othersMayWrite } from "../user-group.ts";
import { refusePlantedLinks } from "../util/write-file.ts";

/**
 * Refuse roots that are not folders (`kerncap mcp --root DIR`), at startup, before anything is
 * served: a root that does not exist would make every call answer E_NOT_CAPTURE, saying nothing of
 * why. Each root is followed as the tools' checks follow it (realpath: a link to a folder is one).
 * @param show how a path is shown (the CLI's printable form: control characters escaped)
 * @throws KerncapError E_USAGE naming the first root that does not exist or is not a folder
 */
export function assertRootFolders(roots: string[], show: (p: string) => string = (p) => p): void {
  for (const r of roots) {
    let st: ReturnType<typeof statSync> | undefined;
    try {
      st = statSync(realpathSync(r));
    } catch {
      st = undefined;
    }
    if (!st?.isDirectory())
      throw new KerncapError("E_USAGE", `--root ${show(r)} ${st ? "is not a folder" : "does not exist"}: no tool call could reach a capture under it`, {
        hint: "Give --root an existing folder that holds (or will hold) the capture folders, e.g. --root ~/work; without --root the server's working folder is the root.",
      });
  }
}

/**
 * The roots the server serves, each by its real path, taken once at startup: a root named through
 * a link or folder that another user may re-point or rename (swappableCapture's rule) is refused,
 * as they would choose what the agent reaches after the server started (adversary 81 #18: a root
 * that was another user's link in /tmp, re-pointed at the user's 0700 folder, gave read_file and
 * edit_file its files).
 * @throws KerncapError E_UNSAFE_PATH naming the root and why
 */
export function pinnedRoots(roots: string[], show: (p: string) => string = (p) => p): string[] {
  return roots.map((r) => {
    // a link on the way that another user made (in /tmp, or in a folder of theirs): they re-point it at will
    refusePlantedLinks(
      r,
      "the server's root",
      "Give --root a folder of your own by its own path (the folder the link names, if it is yours); nothing was served.",
      true,
    );
    const real = realpathSync(r);
    const risk = swappableCapture(r, real);
    if (risk)
      throw new KerncapError("E_UNSAFE_PATH", `--root ${show(r)}: ${risk}, so they could change what the agent reaches while the server runs`, {
        hint: "Give --root a folder of your own reached through folders only you (or root) may change, e.g. --root ~/work; nothing was served.",
      });
    return real;
  });
}

/** Whether the real path `real` is one of the roots or lies under one (each root by its real path); true without roots (a library caller's own choice). */
function underRoots(real: string, roots: string[] | undefined): boolean {
  return (
    !roots ||
    roots.some((r) => {
      const rr = realpathSync(r);
      return real === rr || real.startsWith(rr.endsWith("/") ? rr : `${rr}/`);
    })
  );
}

/** Whether `dir`/`f` is a regular file (lstat: not a link). */
function lstatOk(dir: string, f: string): boolean {
  try {
    return lstatSync(join(dir, f)).isFile();
  } catch {
    return false;
  }
}

/**
 * The capture that holds the folder `p` (path as given, made absolute) when that capture lies
 * under the roots too: a folder inside a capture (its src/, a manifest copied under it) is that
 * capture's content. Undefined when there is none, or when it lies outside the roots (nothing
 * outside is named: the caller's one message says it).
 */
function outerUnderRoots(p: string, real: string, roots: string[] | undefined): { outer?: string; outside: boolean } {
  const outer = outerCapture(real) ?? outerCapture(p);
  if (!outer) return { outside: false };
  let realOuter: string;
  try {
    realOuter = realpathSync(outer);
  } catch {
    return { outside: true };
  }
  return underRoots(realOuter, roots) ? { outer, outside: false } : { outside: true };
}

/**
 * Why another local user could put something else at the name of the capture folder `p` (real
 * path `real`) between the server's check and a tool's use of it, or undefined: a folder on the
 * way that others may rename entries of (src/cache.ts sharedParentRisk: group- or world-writable
 * and not sticky, or another user's), or the folder itself another user's (not root's) in a parent
 * others may write, sticky or not: its owner renames it and leaves a link to a folder of yours at
 * its name (adversary 34: a capture in a 1777 root swapped for a link to the user's home gave
 * read_file the home's files and edit_file a project's source). Source: lstat owner and mode bits.
 */
export function swappableCapture(p: string, real: string, uid = process.geteuid?.()): string | undefined {
  if (uid === undefined) return undefined;
  const risk = sharedParentRisk(p, uid); // the chains of the name as given, its parent's real path and the folder's own
  if (risk) return risk;
  const st = lstatSync(real, { throwIfNoEntry: false });
  const parent = lstatSync(dirname(real), { throwIfNoEntry: false });
  if (st && parent && st.uid !== uid && st.uid !== 0 && othersMayWrite(parent, dirname(real)))
    return `${real} belongs to another user (uid ${st.uid}) and lies in ${dirname(real)}, which others may write (mode ${(parent.mode & 0o7777).toString(8).padStart(4, "0")}): its owner may rename it and leave a link at its name`;
  return undefined;
}

/**
 * Refuse a tool's capture folder that is not under the server's roots or is not a capture (or a
 * capture set): ONE message for all of these, so that an agent learns nothing of what exists
 * outside (a file, a folder without kerncap.json and no such path read the same). A folder under
 * the roots that lies inside a capture under the roots (cap/src) is E_NESTED_CAPTURE naming that
 * capture, as every verb says it (docs/agent-skill.md); one inside a capture outside the roots gets
 * the one message. A capture set passes only when every capture it holds would pass when named by
 * itself, and is a real folder inside it (src/format/paths.ts captureSetMember): a member that
 * links outside the roots is refused as naming it would be. A capture that passes but whose name
 * another user could change (swappableCapture: the check here and the tool's use take the name
 * twice) is E_UNSAFE_PATH, saying why.
 * @throws KerncapError E_NOT_CAPTURE, E_NESTED_CAPTURE, E_UNSAFE_PATH
 */
export function confineToolDir(d: string, roots: string[] | undefined, cwd = process.cwd()): void {
  const p = resolve(cwd, d);
  let ok = false;
  let nested: string | undefined;
  let swap: string | undefined;
  try {
    const real = realpathSync(p);
    const folder = underRoots(real, roots) && statSync(real).isDirectory();
    const held = folder ? outerUnderRoots(p, real, roots) : { outside: false };
    nested = held.outer;
    ok = folder && !held.outside && !nested && [MANIFEST_FILE, CAPTURE_SET_FILE].some((f) => lstatOk(real, f));
    swap = ok ? swappableCapture(p, real) : undefined;
    // a set (no manifest of its own): each member as if named, and a real folder inside it (no link out)
    if (ok && !lstatOk(real, MANIFEST_FILE)) for (const c of readCaptureSet(real)?.captures ?? []) confineToolDir(captureSetMember(real, c.dir), roots, cwd);
  } catch (e) {
    // a member's own: inside the roots (nested, or its name another user could change); a member's other refusals read as the one message
    if (e instanceof KerncapError && (e.code === "E_NESTED_CAPTURE" || (e.code === "E_UNSAFE_PATH" && e.details?.swappable))) throw e;
    ok = false;
  }
  if (nested) throw nestedCaptureError(p, nested);
  if (swap)
    throw new KerncapError("E_UNSAFE_PATH", `${JSON.stringify(d)}: ${swap}, so a tool could reach another folder by this name than the one checked`, {
      details: { swappable: true },
      hint: "Copy the capture into a folder only you can write (cp -r CAP ~/work/), or serve a root whose folders only you can write; a team folder should be sticky (chmod +t) and each capture its maker's.",
    });
  if (!ok) {
    throw new KerncapError(
      "E_NOT_CAPTURE",
      `${JSON.stringify(d)} names no capture folder under the folders this server was started for${roots ? ` (${roots.join(", ")})` : ""}`,
      {
        // one message whether the name is missing, a file, a folder or outside the roots: no oracle of what exists (nu16 #15 read it as "the roots are wrong")
        hint: "Give a capture folder (written by kerncap run) by its path inside the server's --root folders (default: the folder `kerncap mcp` started in); whether nothing is there, or something that is no capture, is not told.",
      },
    );
  }
}

/**
 * Refuse `run`'s capture folder `out` (default kerncap-capture) outside the server's roots:
 * resolved as the run resolves it (against `cwd`, else the server's folder), by the real path of
 * its deepest part that exists (a link leads where it points) and the rest as written. Said before
 * the child starts, so it shows on any machine (the run's own checks of `out` come after the
 * server's: replaceable, its parent a folder, not inside a capture). One message whatever is
 * there; a `cwd` that does not exist passes here (the tool's own E_USAGE says it).
 * @throws KerncapError E_UNSAFE_PATH
 */
export function confineOut(out: string | undefined, cwd: string | undefined, roots: string[] | undefined): void {
  confineRunPath("out", out ?? "kerncap-capture", cwd, roots, "Give out as a folder under the server's --root folders");
}

/**
 * Refuse `run`'s `sourceRoot` and `compileCommands` (what the capture reads and copies into the
 * capture's src/, where read_file returns it) outside the server's roots, as confineOut does `out`:
 * one message whether the path exists, is readable or not (no oracle of what lies outside the
 * roots: adversary 83 #02). Absent: nothing to check.
 * @throws KerncapError E_UNSAFE_PATH
 */
export function confineRunInputs(a: { sourceRoot?: unknown; compileCommands?: unknown; cwd?: unknown }, roots: string[] | undefined): void {
  const cwd = typeof a.cwd === "string" ? a.cwd : undefined;
  if (typeof a.sourceRoot === "string") confineRunPath("sourceRoot", a.sourceRoot, cwd, roots, "Give sourceRoot as a folder under the server's --root folders");
  if (typeof a.compileCommands === "string")
    confineRunPath("compileCommands", a.compileCommands, cwd, roots, "Give compileCommands as a file under the server's --root folders");
}

/** `value` of argument `label` resolved against `cwd` (else the server's folder) by its deepest existing part's real path, under `roots`, else E_UNSAFE_PATH with `hint`. */
function confineRunPath(label: string, value: string, cwd: string | undefined, roots: string[] | undefined, hint: string): void {
  if (!roots) return;
  let base: string;
  try {
    base = realpathSync(resolve(cwd ?? process.cwd()));
  } catch {
    return;
  }
  if (!deepestRealUnder(resolve(base, value), roots))
    throw new KerncapError("E_UNSAFE_PATH", `${label} ${JSON.stringify(value)} is not under the folders this server was started for (${roots.join(", ")})`, {
      hint: `${hint} (a relative path is resolved against cwd, else the folder \`kerncap mcp\` started in); nothing was run.`,
    });
}

/**
 * Whether absolute path `p` lies under `roots` by the real path of its deepest part that exists
 * (a link leads where it points) and the rest as written; false for a dangling link or a loop on
 * the way (there, but leading nowhere: never written through) and for a part that cannot be read.
 */
function deepestRealUnder(p: string, roots: string[]): boolean {
  try {
    let head = p;
    const rest: string[] = [];
    for (;;) {
      try {
        head = join(realpathSync(head), ...rest);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT" || lstatSync(head, { throwIfNoEntry: false })) throw e;
        if (dirname(head) === head) throw e;
        rest.unshift(basename(head));
        head = dirname(head);
      }
    }
    return underRoots(head, roots);
  } catch {
    return false;
  }
}

/**
 * Refuse the working folder `cwd` of `run` and `list` (the application's) outside the server's
 * roots, by its real path: what an agent's application reads and writes by relative paths stays in
 * the folders the server was started for (adversary 58: `list` ran in `/`). A `cwd` that does not
 * exist passes here only under the roots (the tool's own E_USAGE says it); outside them it gets the
 * one message, as every `cwd` there (no oracle of what exists); none given is the server's own folder.
 * @throws KerncapError E_UNSAFE_PATH
 */
export function confineCwd(cwd: string | undefined, roots: string[] | undefined): void {
  if (!roots || cwd === undefined) return;
  const outside = () =>
    new KerncapError("E_UNSAFE_PATH", `cwd ${JSON.stringify(cwd)} is not under the folders this server was started for (${roots.join(", ")})`, {
      hint: "Give cwd as a folder under the server's --root folders, or leave it out (the folder `kerncap mcp` started in); nothing was run.",
    });
  let real: string;
  try {
    real = realpathSync(resolve(cwd));
  } catch {
    // one message whatever is there: a missing or unsearchable folder outside the roots reads as any other outside them
    // (adversary 84 #02: "does not exist" told which folders exist); one under the roots is the tool's E_USAGE
    if (deepestRealUnder(resolve(cwd), roots)) return;
    throw outside();
  }
  if (!underRoots(real, roots)) throw outside();
  // a capture's files are data: a process started in one (kerncap, then the application) would load a library it holds
  // through an empty LD_LIBRARY_PATH entry, the working folder (adversary 81 #04: a received src/libdl.so.2)
  const capture = lstatOk(real, MANIFEST_FILE) || lstatOk(real, CAPTURE_SET_FILE) ? real : outerCapture(real); // a capture set's folder too (adversary 82 #01)
  if (capture)
    throw new KerncapError(
      "E_UNSAFE_PATH",
      `cwd ${JSON.stringify(cwd)} lies in the capture ${capture}: a capture's files are data, never the working folder of a process (the dynamic loader reads an empty LD_LIBRARY_PATH entry as that folder)`,
      { hint: "Give cwd as the application's own folder, outside every capture; nothing was run." },
    );
}
