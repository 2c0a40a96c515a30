/**
 * Whose build.sh `kerncap validate` runs: the trust gate. A capture made here by the user is
 * theirs; a **received** capture (src/format/received.ts: unpacked from an archive, another user's,
 * or made on another machine) is not: its build.sh, and what it compiles and runs, runs only once
 * the user said `--trust` after reading it (validate prints it and refuses, exit 2).
 *
 * What runs is what was trusted: the refusal shows every file the build would execute
 * (src/format/what-runs.ts, shown by src/format/trust-prompt.ts) and one digest of them; a build
 * let run executes a private copy of exactly those bytes (src/format/staged-build.ts
 * stageTrustedBuild), never the capture's files read again. `--trust=DIGEST` runs only when the
 * digest is still the one shown. The decision is recorded outside every capture, in the user's
 * state folder (src/format/trust-records.ts), keyed by the folder and the digest of what runs (a
 * change asks again).
 */
import { shellPath } from "../util/shell-quote.ts";
import { join } from "node:path";
import { fstatSync, lstatSync, realpathSync } from "node:fs";
import { JUDGE_FILE } from "./file-names.ts";
import { judgingAccepted } from "./judge-accepted.ts";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal, oneLine } from "../escape.ts";
import type { Manifest } from "./manifest.ts";
import { notYours, onlyUnsealed, receivedBecause } from "./received.ts";
import { MADE_HERE_SEAL, resealMadeHere } from "./made-here.ts";
import { approveBuild, approvedDigest } from "./staged-build.ts";
import { readRecords, remember, sameTrustKey, stateDir, stateFolderRisk, TRUST_FILE, trustKey } from "./trust-records.ts";
import { BUILD_SH_IN_MESSAGE, shownFiles, shownInterpreter, shownNotStock } from "./trust-prompt.ts";
import { readWhatRuns, type WhatRuns } from "./what-runs.ts";
import { createHash } from "node:crypto";
import { log } from "../log.ts";

/** `--trust=DIGEST` as the user may type it: with or without `sha256:`, any case. */
function normalDigest(d: string): string {
  return d
    .trim()
    .toLowerCase()
    .replace(/^sha256:/, "");
}

/** requireTrustedBuild's options (said in its comment). */
export interface TrustGateOptions {
  remember?: boolean;
  command?: string;
  inMessage?: boolean;
  name?: string;
  shown?: string;
  theirs?: string;
  theirsHint?: (digest: string) => string;
  /** What the refusal says of the build and the gate (default: "would run with your rights, so kerncap runs it only once you pass --trust"; export runs nothing itself). */
  gated?: string;
  /** What the user does after running `command --trust=DIGEST` where that command is not the verb refused (eval's: "then run the eval again"). */
  then?: string;
  /** Whether the user's --trust also seals a copy of theirs as their own (adoptOwnCopy; default true): not check's, over a corpus no refusal showed. */
  adopt?: boolean;
}

/**
 * Before validate (or the watch, tune, profile --build, check --rebuild) runs a received capture's
 * build: it runs only when the record says the user trusted this folder with these files (the
 * digest of WhatRuns), or `trust` says so now, then recorded (unless `o.remember` is false:
 * check's temp folder of an unpacked archive is gone after its check).
 *  - `trust` a string (`--trust=DIGEST`): the digest the refusal showed; a different current digest
 *    is refused (E_TRUST_CHANGED: the files changed since they were shown).
 *  - `trust` true (plain `--trust`): runs what is read now and says its digest; refused
 *    (E_UNTRUSTED) when another user owns or every user can write the folder or a file of it, or
 *    the archive it was unpacked from (`o.theirs`; they could change the files between the user's
 *    reading and --trust): --trust=DIGEST there.
 * Otherwise the build is refused, and every file it would execute shown (escaped) with the one
 * digest: printed to stderr above the error, or with `o.inMessage` (validate --confine: kerncap
 * mcp, whose agent reads the error document, not stderr) carried in the error's message (at most
 * BUILD_SH_IN_MESSAGE bytes of the files). A capture made here passes without a word.
 * A build let run is remembered for this process: buildReproducer and tune execute a private copy
 * of the files, read again and held to the same digest (stageTrustedBuild).
 * `o.command`: the command line to run again with --trust, for the hint (default `kerncap validate DIR`).
 * `o.name`: how messages name the capture (default DIR; check names the archive, never the
 * temporary folder it unpacked it into); `o.theirs`: why plain --trust is not enough besides the
 * folder's own files (check: "the archive A belongs to another user …", whose folder is a private
 * unpacked copy), and `o.theirsHint` the way out then, given the digest (default: BASE --trust=DIGEST); `o.shown`: where the messages say the files were printed
 * (default "shown above"; check's outcome is read in its table and results file, far from them).
 * @throws KerncapError E_UNTRUSTED (exit 2) naming why the capture counts as received,
 *   E_TRUST_CHANGED (exit 2), E_UNSAFE_PATH (a Triton kernel file outside src/)
 */
/**
 * What a trust refusal says for programs (kerncap.error/1 `error.details.trust`): the digest to
 * pass as --trust=DIGEST, each file the build would run (name in the capture folder, bytes,
 * SHA-256 hex) and the interpreter it names (null where none), the command to run once trusted.
 */
export function trustDetails(
  runs: WhatRuns,
  base: string,
): { digest: string; files: { name: string; size: number; sha256: string }[]; interpreter: string | null; command: string } {
  return {
    digest: runs.digest,
    files: runs.files.map((f) => ({ name: f.name, size: f.bytes.byteLength, sha256: createHash("sha256").update(f.bytes).digest("hex") })),
    interpreter: runs.interpreter,
    command: `${base} --trust=${runs.digest}`,
  };
}

/**
 * What a --trust is remembered for, exactly (nu9 #9: "a change to any" read as every file under
 * src/): this folder with the files of the digest as they are now (`runs.files`: build.sh, or a
 * Triton capture's kernel file, launcher and the interpreter it names); an edit of the other sources
 * under src/ does not ask again, unless the build.sh is not kerncap's (`runs.notStock`: every file
 * under src/ is in the digest then).
 */
export function rememberedFor(runs: WhatRuns): string {
  const pinned = [...runs.files.map((f) => f.name), ...(runs.interpreter !== null ? [runs.interpreterNamed ?? "the interpreter"] : [])];
  const one = pinned.length === 1;
  return `remembered for this folder and ${one ? "this" : "these"} exact ${one ? "file" : "files"} (${pinned.join(", ")}): a change to ${one ? "it" : "any of them"} asks again${runs.notStock === undefined ? "; an edit of the other sources under src/ does not" : ""}`;
}

/**
 * After the user's --trust on the command line (never an MCP agent's): a folder received only for
 * want of the user's seal (src/format/received.ts onlyUnsealed: a copy of a capture of theirs, one
 * made before seals) is sealed as theirs from now on (src/format/made-here.ts); this run's build
 * still runs the bytes just trusted.
 */
function adoptOwnCopy(dir: string, m: Manifest, name: string, runs: WhatRuns): void {
  if (!onlyUnsealed(dir, m)) return;
  const shown = escapeForTerminal(name, { oneLine: true });
  const not = notAdoptable(dir, runs);
  if (not) return log.info(`${shown} stays received: ${not}`);
  if (resealMadeHere(dir)) log.info(`${shown} is sealed as your own capture, made here (${MADE_HERE_SEAL}): later builds need no --trust`);
}

/** Why a copy of the user's own (onlyUnsealed) is not sealed by their --trust (a phrase), or undefined when it is. */
function notAdoptable(dir: string, runs: WhatRuns): string | undefined {
  // a build.sh of the user's own runs files under src/ that a seal does not cover (an agent may edit them): trusted by its digest only (adversary 59)
  if (runs.notStock !== undefined) return `${runs.notStock}: each change of what its build runs asks again`;
  // judging settings the user never accepted would be in force in a capture of theirs (adversary 59: a tolerance of 1e30);
  // ones accepted as they are now are the user's (nu83 #1: accept, then --trust, left the copy received)
  if (lstatSync(join(dir, JUDGE_FILE), { throwIfNoEntry: false }) && !judgingAccepted(dir))
    return `it holds judging settings (${JUDGE_FILE}); read and accept them first (kerncap judge ${shellPath(dir)} --accept), then --trust seals it as yours`;
  return undefined;
}

/** The parenthesis after the --trust command of a refusal: that plain --trust is enough (`plain`), and what the trust is remembered for. */
function trustNotes(plain: boolean, remembered: string | undefined): string {
  const notes = [plain ? "kerncap's own build.sh: plain --trust is enough" : "", remembered ?? ""].filter(Boolean);
  return notes.length ? ` (${notes.join("; ")})` : "";
}

export function requireTrustedBuild(dirArg: string, m: Manifest, trust: boolean | string, o: TrustGateOptions = {}): void {
  const why = receivedBecause(dirArg, m);
  if (!why) return;
  const runs = readWhatRuns(dirArg, m.kernel.frontend ?? "", true);
  if (!runs) return; // nothing of the capture runs: the build's own error (E_NO_REPRODUCER) says so
  const key = trustKey(dirArg, runs.digest);
  const state = stateDir();
  const records = state ? readRecords(state) : [];
  const approve = () => approveBuild(key.dir, runs.digest, runs.frontend);
  const base = o.command ?? `kerncap validate ${shellPath(dirArg)}`;
  const names = runs.files.map((f) => f.name).join(", ");
  const name = o.name ?? dirArg;
  const shown = o.shown ?? "shown above"; // kerncap's own build.sh is listed, not printed ("printed above" named no print: a new user's finding)
  // the same facts for --json and MCP readers (kerncap.error/1 error.details): no digest to regex out of the prose
  const details = { trust: trustDetails(runs, base) };
  const show = () => {
    if (!o.inMessage)
      process.stderr.write(
        `──── ${escapeForTerminal(o.name ?? key.dir, { oneLine: true })}: received, so its build runs nothing until you pass --trust (why, and the command, after the files); what the build would run (one digest of all of it: sha256 ${runs.digest}) ────\n${shownNotStock(runs)}${shownFiles(runs)}${shownInterpreter(runs)}`,
      );
  };
  if (typeof trust === "string") {
    if (normalDigest(trust) !== runs.digest) {
      show();
      throw new KerncapError(
        "E_TRUST_CHANGED",
        `${name}: the files its build runs (${names}) changed since they were shown: their digest is now ${runs.digest}, --trust gave ${trust}`,
        {
          details,
          hint: `Nothing was run. Read the files again (${shown}); if you trust them, run ${base} --trust=${runs.digest}.`,
        },
      );
    }
  } else if (records.some((r) => sameTrustKey(r, key))) {
    approve();
    // trusted before, when it could not be sealed yet (judging settings not accepted then): this --trust seals it now
    if (trust && !o.inMessage && o.adopt !== false) adoptOwnCopy(dirArg, m, name, runs);
    return;
  } else if (!trust) {
    const command = `${base} --trust=${runs.digest}`;
    if (o.inMessage) {
      throw new KerncapError(
        "E_UNTRUSTED",
        `${dirArg} is a received capture (${why}): what its build runs (${names} in ${key.dir}; sha256 ${runs.digest}; below) and what it compiles would run with the user's rights, so kerncap runs it only once the user trusts it\n` +
          `${shownNotStock(runs)}${shownFiles(runs, BUILD_SH_IN_MESSAGE)}${shownInterpreter(runs)}`.replace(/\n$/, ""),
        {
          details,
          hint: `Show ${names} and the sources under src/ to the user. If they trust them, they run ${command} once on the command line (remembered for this folder and these files, which kerncap mcp then builds as they are)${o.then ? `; ${o.then}` : ""}, or start kerncap mcp with --trust-builds.`,
        },
      );
    }
    show();
    const ownCopy = !o.inMessage && o.adopt !== false && onlyUnsealed(dirArg, m) && !notAdoptable(dirArg, runs);
    throw new KerncapError(
      "E_UNTRUSTED",
      `${name} is a received capture (${why}): what its build runs (${names}${runs.interpreter !== null ? `, ${runs.interpreterNamed ?? "the interpreter"}` : ""}: ${shown}; the digest of all of it: sha256 ${runs.digest}) and what it compiles ${o.gated ?? "would run with your rights, so kerncap runs it only once you pass --trust"}`,
      {
        details,
        hint: `${ownCopy ? `It names this machine and you: a copy of a capture of yours (cp -r), or one made before kerncap sealed captures; once you trust it, kerncap seals it as yours for this folder and later builds need no --trust. ` : ""}Read ${names} and the sources under src/; if you trust them, run ${command}${trustNotes(runs.notStock === undefined && !notYours(dirArg), o.remember === false ? undefined : rememberedFor(runs))}${o.then ? `; ${o.then}` : ""}. An MCP agent's build (validate, tune, profile, evaluate) needs kerncap mcp --trust-builds.`,
      },
    );
  } else {
    if (runs.notStock !== undefined) {
      show();
      throw new KerncapError(
        "E_UNTRUSTED",
        `${name}: plain --trust is not enough here: ${runs.notStock}, so what it runs is build.sh and every file under src/ (${runs.files.length} files, ${shown}), not only what kerncap's own build.sh runs`,
        {
          details,
          hint: `Read build.sh and the files marked as run (${shown}, sha256 ${runs.digest}); if you trust them all, run ${base} --trust=${runs.digest}. Every change under src/ then asks again; ask the sender for a capture whose build.sh kerncap wrote to edit it freely.`,
        },
      );
    }
    const theirs = notYours(dirArg) ?? o.theirs;
    if (theirs) {
      show();
      throw new KerncapError(
        "E_UNTRUSTED",
        `${name}: plain --trust is not enough here: ${theirs}, so the files its build runs (${names}) could have changed since you read them`,
        {
          details,
          hint:
            o.theirsHint?.(runs.digest) ??
            `Read them (${shown}, sha256 ${runs.digest}); if you trust them, run ${base} --trust=${runs.digest}: kerncap then runs those bytes only, or refuses if they changed.`,
        },
      );
    }
  }
  approve();
  if (!o.inMessage && o.adopt !== false) adoptOwnCopy(dirArg, m, name, runs);
  if (o.remember === false)
    return log.info(`trusted ${oneLine(name)}'s build for this run only: ${names} (their one digest ${runs.digest}, the one a refusal shows; not recorded)`);
  log.info(`trusted ${oneLine(key.dir)}'s build: ${names} (their one digest ${runs.digest}, the one a refusal shows)`);
  if (!state)
    return log.warn(
      `--trust: the state folder is not used (${stateFolderRisk() ?? "it is not yours alone or cannot be written"}): the trust is not remembered`,
    );
  remember(state, records, key);
  log.info(`recorded in ${join(state, TRUST_FILE)}`);
}

/**
 * The trust gate of a build of `copy`, a private copy of DIR with other files (kerncap eval's
 * candidate, src/eval/candidates.ts materialise), asked once the copy is made, after DIR's own
 * gate (requireTrustedBuild) and before the copy's build. For a received DIR, what runs is what
 * the user trusted: the copy's files that run (readWhatRuns, read as a received capture's: with
 * a build.sh of its own, every file under src/) must have the digest this process's gate
 * approved for DIR, the one `--trust=DIGEST` gave, or one the user's record holds for DIR; plain
 * `--trust` runs the copy's bytes read now only where it is enough for DIR itself (kerncap's own
 * build.sh, a folder of the user's alone). The copy is then approved with that digest: its build
 * executes a private copy of exactly those bytes (stageTrustedBuild). A capture of the user's own
 * passes without a word. `name`: how the refusal names the candidate.
 * @throws KerncapError E_UNTRUSTED (exit 2) showing the copy's files and their digest
 */
export function requireTrustedCopy(dirArg: string, copy: string, m: Manifest, trust: boolean | string, o: { name: string; inMessage?: boolean }): void {
  if (!receivedBecause(dirArg, m)) return;
  const runs = readWhatRuns(copy, m.kernel.frontend ?? "", true);
  if (!runs) return;
  const home = trustKey(dirArg, runs.digest);
  const plainEnough = trust === true && runs.notStock === undefined && !notYours(dirArg);
  const state = stateDir();
  const trusted =
    approvedDigest(dirArg) === runs.digest ||
    (typeof trust === "string" && normalDigest(trust) === runs.digest) ||
    plainEnough ||
    (state !== undefined && readRecords(state).some((r) => sameTrustKey(r, home)));
  if (trusted) {
    approveBuild(realpathSync(copy), runs.digest, runs.frontend);
    return;
  }
  const names = runs.files.map((f) => f.name).join(", ");
  const shown = `${shownNotStock(runs)}${shownFiles(runs, o.inMessage ? BUILD_SH_IN_MESSAGE : undefined)}${shownInterpreter(runs)}`;
  if (!o.inMessage)
    process.stderr.write(
      `──── ${escapeForTerminal(o.name, { oneLine: true })}: what its build would run (one digest of all of it: sha256 ${runs.digest}) ────\n${shown}`,
    );
  throw new KerncapError(
    "E_UNTRUSTED",
    `${o.name} changes files that the build of the received capture ${dirArg} runs (${names}; sha256 ${runs.digest}, not a digest the user trusted): nothing of it was run` +
      (o.inMessage ? `\n${shown}`.replace(/\n$/, "") : ""),
    {
      hint: `A received capture's build runs only the bytes the user trusted, a candidate's as the capture's own. Show the files to the user; if they trust them, they apply the change to ${dirArg}/src/ and run kerncap validate ${shellPath(dirArg)}, which shows the files, then trust the digest it shows (recorded for the folder: this candidate then builds), or evaluate the change on a capture whose build.sh kerncap wrote.`,
    },
  );
}

/**
 * Record DIR's build.sh as trusted without asking: for a folder kerncap wrote from its own files
 * (`kerncap demo`: the build.sh embedded in this executable), which counts as received on a
 * machine without a machine-id (src/format/received.ts). Nothing is recorded where the state folder is unusable (then
 * validate asks, as for any received capture), nor when `held` is given and DIR is no longer that folder.
 */
export function trustOwnBuild(dir: string, m: Manifest, held?: { at: string; fd: number }): void {
  // `held`: the folder kerncap wrote, still open (src/util/write-file.ts makePrivateTemp): its files are read through
  // the fd, and nothing is recorded unless DIR's name still leads to it (another user may swap a folder in a shared parent)
  const runs = readWhatRuns(held?.at ?? dir, m.kernel.frontend ?? "", receivedBecause(dir, m) !== undefined);
  const state = stateDir();
  if (!runs || !state) return;
  const key = trustKey(dir, runs.digest);
  if (held) {
    const st = fstatSync(held.fd);
    if (st.dev !== key.dev || st.ino !== key.ino) return;
  }
  remember(state, readRecords(state), key);
}

/**
 * Whether the user's trust record holds DIR with exactly the bytes a rebuild of it would run now
 * (readWhatRuns): what `--trust` on the command line, or trustOwnBuild, recorded. A confined build
 * (src/format/rendered.ts) runs a build.sh kerncap did not write only then. False when nothing of
 * the capture runs or the state folder is unusable. `digest`: of the bytes a build will run (a
 * private copy's, StagedBuild.digest) instead of the folder's read now.
 */
export function trustRecorded(dir: string, m: Manifest, digest?: string): boolean {
  let runs: string | undefined;
  try {
    runs = digest === undefined ? readWhatRuns(dir, m.kernel.frontend ?? "", receivedBecause(dir, m) !== undefined)?.digest : digest;
  } catch {
    return false; // what the gate refuses (a program in the capture, a link) was never trusted; the gate says why
  }
  const state = stateDir();
  if (!runs || !state) return false;
  const key = trustKey(dir, runs);
  return readRecords(state).some((r) => sameTrustKey(r, key));
}
