import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { EMBEDDED_TEMPLATES, extractTemplates, renderTemplateDir } from "./templates.ts";

const CHECKOUT = resolve(import.meta.dir, "../../templates");

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

test("the executable embeds every template file, with its content and mode bits", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "kerncap-tpl-")), "t");
  extractTemplates(dir);
  expect(tree(dir)).toEqual(tree(CHECKOUT));
  expect(EMBEDDED_TEMPLATES.length).toBe(Object.keys(tree(CHECKOUT)).length);
});

test("rendering is strict: a missing field throws instead of writing an empty value", () => {
  const out = mkdtempSync(join(tmpdir(), "kerncap-tpl-out-"));
  expect(() => renderTemplateDir(join(CHECKOUT, "cuda"), out, {})).toThrow();
});
