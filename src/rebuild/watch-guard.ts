/**
 * What a watch holds to before each save's build (src/rebuild/watch.ts): the capture folder is the
 * one the watch started on (its device, inode and birth time: a folder put at the name meanwhile,
 * by `kerncap unpack --force`, `mv` or tar, is another), and a capture that was made here when the
 * watch started still is (src/format/received.ts receivedBecause: unpack's mark, files others may
 * write, its seal, src/format/made-here.ts). Adversary 59: an archive unpacked with --force at the
 * watched folder's name had its build.sh run at the next save, no gate.
 */
import { statSync } from "node:fs";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import type { Manifest } from "../format/manifest.ts";
import { receivedBecause } from "../format/received.ts";
import { shellPath } from "../util/shell-quote.ts";

type Identity = { dev: bigint; ino: bigint; birth: bigint };

function identityOf(dir: string): Identity | undefined {
  try {
    const st = statSync(dir, { bigint: true });
    return { dev: st.dev, ino: st.ino, birth: st.birthtimeNs };
  } catch {
    return undefined;
  }
}

/**
 * A guard of the capture folder `dir` (manifest `m`) as it is now; call it before each build.
 * @returns the guard: it throws KerncapError E_UNSAFE_PATH (another folder at the name) or
 *   E_UNTRUSTED (a capture made here at the start that counts as received now), which end the watch
 */
export function watchGuard(dir: string, m: Manifest): () => void {
  const start = identityOf(dir);
  const madeHere = receivedBecause(dir, m) === undefined;
  const again = `Start the watch again (kerncap validate ${shellPath(dir)} --watch): it shows what the folder's build runs and asks --trust where it is received.`;
  return () => {
    const now = identityOf(dir);
    if (!start || !now || now.dev !== start.dev || now.ino !== start.ino || now.birth !== start.birth)
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${escapeForTerminal(dir, { oneLine: true })}: another folder is at the capture's name now (replaced while the watch ran): nothing of it was built`,
        {
          hint: again,
        },
      );
    const why = madeHere ? receivedBecause(dir, m) : undefined;
    if (why)
      throw new KerncapError(
        "E_UNTRUSTED",
        `${escapeForTerminal(dir, { oneLine: true })} counts as received now (${why}), not as when the watch started: nothing of it was built`,
        {
          hint: again,
        },
      );
  };
}
