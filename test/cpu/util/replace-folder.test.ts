/**
 * src/util/replace-folder.ts: --force's replacement of a folder in a parent another user may write.
 * The attack it closes (adversary 28): the folder at the name was checked (a previous capture), then
 * another user exchanged the name with another folder of the victim's (`notes`, 0700) before the
 * removal by name, and `notes` was emptied. Here the exchange happens between the check and the
 * replacement, as a racing attacker's rename would.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isKerncapError } from "../../../src/errors.ts";
import { replaceableKind } from "../../../src/format/capture-dir.ts";
import { replaceFolder } from "../../../src/util/replace-folder.ts";
import { makeCapture, tempDir } from "../fixtures.ts";

const refuse = (old: string) => (replaceableKind(old) ? undefined : "not a kerncap capture nor an empty folder");

async function team(): Promise<{ parent: string; cap: string; notes: string; fresh: string }> {
  const parent = tempDir();
  const cap = join(parent, "cap");
  await makeCapture(cap);
  const notes = join(parent, "notes");
  mkdirSync(notes, { mode: 0o700 });
  writeFileSync(join(notes, "precious.txt"), "mine\n");
  const fresh = join(parent, "fresh");
  mkdirSync(fresh);
  writeFileSync(join(fresh, "new.txt"), "new\n");
  return { parent, cap, notes, fresh };
}

test("the folder checked is replaced: the old one removed through the holder, the new one placed, no holder left", async () => {
  const t = await team();
  const seen: string[] = [];
  replaceFolder(t.cap, { refuse, before: (old) => seen.push(readdirSync(old).sort().join(",")), place: (d) => renameSync(t.fresh, d) });
  expect(readdirSync(t.cap)).toEqual(["new.txt"]);
  expect(seen[0]).toContain("kerncap.json"); // judged and warned of where it was moved, before the new one went in
  expect(readdirSync(t.parent).sort()).toEqual(["cap", "notes"]);
});

test("another folder exchanged in at the name after the check: moved back, E_UNSAFE_PATH, nothing of it removed, nothing placed", async () => {
  const t = await team();
  // the attacker's exchange of the two names, after kerncap checked `cap`
  const swap = join(t.parent, "swap");
  renameSync(t.cap, swap);
  renameSync(t.notes, t.cap);
  renameSync(swap, t.notes);
  let placed = false;
  let e: unknown;
  try {
    replaceFolder(t.cap, { refuse, place: () => void (placed = true) });
  } catch (x) {
    e = x;
  }
  expect(isKerncapError(e) && e.code).toBe("E_UNSAFE_PATH");
  expect((e as Error).message).toContain("what lies there now is not the folder kerncap checked (not a kerncap capture nor an empty folder)");
  expect((e as Error).message).not.toContain("/proc/self/fd");
  expect(placed).toBe(false);
  expect(readFileSync(join(t.cap, "precious.txt"), "utf8")).toBe("mine\n"); // the victim's notes, where the attacker put them
  expect(existsSync(join(t.notes, "kerncap.json"))).toBe(true);
  expect(readdirSync(t.parent).sort()).toEqual(["cap", "fresh", "notes"]);
});

test("a placement that fails puts the old folder back", async () => {
  const t = await team();
  expect(() =>
    replaceFolder(t.cap, {
      refuse,
      place: () => {
        throw new Error("rename failed");
      },
    }),
  ).toThrow("rename failed");
  expect(existsSync(join(t.cap, "kerncap.json"))).toBe(true);
  expect(readdirSync(t.parent).sort()).toEqual(["cap", "fresh", "notes"]);
});

test("the parent swapped for a link to another folder of the user's between the move and the placement: E_UNSAFE_PATH, the old folder back where it was, nothing of the other folder removed", async () => {
  const root = tempDir();
  const t = await team();
  // another folder of the user's, holding a capture of the same name (what the attacker's link would point at)
  const elsewhere = join(root, "elsewhere");
  mkdirSync(elsewhere);
  await makeCapture(join(elsewhere, "cap"));
  const moved = join(root, "team-moved");
  let e: unknown;
  try {
    replaceFolder(t.cap, {
      refuse,
      // the swap, as a racing attacker's: after kerncap moved the old folder out, the parent's name leads elsewhere
      before: () => {
        renameSync(t.parent, moved);
        symlinkSync(elsewhere, t.parent);
      },
      place: (d) => renameSync(t.fresh, d),
    });
  } catch (x) {
    e = x;
  }
  expect(isKerncapError(e) && e.code).toBe("E_UNSAFE_PATH");
  expect((e as Error).message).toContain("its parent folder was replaced while kerncap ran");
  expect(existsSync(join(elsewhere, "cap/kerncap.json"))).toBe(true); // the other capture untouched
  expect(existsSync(join(moved, "cap/kerncap.json"))).toBe(true); // the old folder back in its own parent
  expect(readdirSync(moved).sort()).toEqual(["cap", "fresh", "notes"]);
});

// adversary 35: four `export -f` at once onto one folder; a loser's E_IO named /proc/self/fd paths
test("another process places its folder at the name while this one replaces it: E_EXISTS naming the folder, theirs kept, the old one kept in the holder and said", async () => {
  const t = await team();
  let e: unknown;
  const { stderrOf } = await import("../fixtures.ts");
  const { err } = await stderrOf(() => {
    try {
      replaceFolder(t.cap, {
        refuse,
        place: (d) => {
          mkdirSync(d); // the other process's folder lands first
          writeFileSync(join(d, "theirs.txt"), "theirs\n");
          renameSync(t.fresh, d); // ENOTEMPTY
        },
      });
    } catch (x) {
      e = x;
    }
  });
  expect(isKerncapError(e) && e.code).toBe("E_EXISTS");
  expect((e as Error).message).toBe(`${t.cap} was written by another process while kerncap replaced it; this run's folder was not placed`);
  expect(readdirSync(t.cap)).toEqual(["theirs.txt"]);
  expect(err).toContain("the folder that was there is kept in");
  const kept = readdirSync(t.parent).find((n) => n.startsWith("cap.tmp-"))!;
  expect(existsSync(join(t.parent, kept, "old", "kerncap.json"))).toBe(true);
});
