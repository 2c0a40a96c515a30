import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { writeFolderAtomically } from "../../../src/cache.ts";
import { frontends } from "../../../src/frontends/index.ts";
import { cacheFiles, CHECKOUT_TEMPLATES, renderTemplateDir } from "../../../src/frontends/templates.ts";
import { EXPORT_TEMPLATES } from "../../../src/export/templates.ts";

function tree(dir: string): Record<string, { text: string; mode: number }> {
  const out: Record<string, { text: string; mode: number }> = {};
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else out[relative(dir, p)] = { text: readFileSync(p, "utf8"), mode: st.mode & 0o777 };
    }
  };
  walk(dir);
  return out;
}

test("the executable embeds every template file, with its content and mode bits, each in its frontend's folder", () => {
  const root = mkdtempSync(join(tmpdir(), "kerncap-tpl-"));
  const withTemplates = frontends().filter((f) => f.templates?.length);
  for (const f of withTemplates) writeFolderAtomically(join(root, f.name), cacheFiles(f.templates!));
  writeFolderAtomically(join(root, "export"), cacheFiles(EXPORT_TEMPLATES)); // kerncap export's folder (src/export/templates.ts)
  expect(tree(root)).toEqual(tree(CHECKOUT_TEMPLATES));
  expect(readdirSync(CHECKOUT_TEMPLATES).sort()).toEqual([...withTemplates.map((f) => f.name), "export"].sort());
});

test("rendering is strict: a missing field throws instead of writing an empty value", () => {
  const out = mkdtempSync(join(tmpdir(), "kerncap-tpl-out-"));
  expect(() => renderTemplateDir(join(CHECKOUT_TEMPLATES, "cuda"), out, {})).toThrow();
});
