/**
 * Reproducer templates (templates/<frontend>/), each frontend's embedded in the executable as text
 * by its own folder (src/frontends/<name>/templates.ts). In a source checkout the folder itself is
 * used; inside the compiled binary the embedded copies are written once to a content-hashed
 * folder of the cache (with their mode bits), so the renderers can walk a real folder either way.
 */
import Handlebars from "handlebars";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { cachedFolder, type CacheFile } from "../cache.ts";
import { shellQuote } from "../util/shell-quote.ts";

/** One template file of a frontend: path under templates/<frontend>/, text, mode bits. */
export interface TemplateFile {
  path: string;
  text: string;
  mode: number;
}

/** The checkout's templates/ (absent inside the compiled binary). */
export const CHECKOUT_TEMPLATES = resolve(import.meta.dir, "../../templates");

const roots = new Map<string, string>();

export const cacheFiles = (files: readonly TemplateFile[]): CacheFile[] => files.map((t) => ({ path: t.path, bytes: t.text, mode: t.mode }));

/**
 * The folder of frontend `name`'s templates: the checkout's templates/<name>, or the cache's copy
 * of `files` (written at first use: importing a frontend writes nothing to the cache).
 */
export function templatesFolder(name: string, files: readonly TemplateFile[]): string {
  let dir = roots.get(name);
  if (dir) return dir;
  const checkout = join(CHECKOUT_TEMPLATES, name);
  dir = existsSync(checkout) ? checkout : cachedFolder(`templates-${name}`, cacheFiles(files));
  roots.set(name, dir);
  return dir;
}

let engine: typeof Handlebars | undefined;

/**
 * The one Handlebars instance for reproducer templates: isolated (`Handlebars.create()`), helpers
 * registered once — `shq` (shell-quote) and `heredocYaml` (a YAML single-quoted scalar inside an
 * unquoted bash heredoc: doubles ', escapes $ ` \). Compile with strict (a missing field throws)
 * and noEscape (no HTML escaping in shell, C++ or Python).
 */
export function templateEngine(): typeof Handlebars {
  if (engine) return engine;
  engine = Handlebars.create();
  engine.registerHelper("shq", (s: unknown) => shellQuote(String(s)));
  engine.registerHelper("heredocYaml", (s: unknown) => String(s).replace(/'/g, "''").replace(/([$`\\])/g, "\\$1"));
  return engine;
}

/**
 * Render a template folder into outDir: `*.hbs` files rendered with ctx (the suffix dropped),
 * every other file copied; each keeps its mode bits.
 * @returns the paths written, relative to outDir.
 */
export function renderTemplateDir(templateDir: string, outDir: string, ctx: Record<string, unknown>): string[] {
  const hb = templateEngine();
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const src = join(dir, name);
      const st = statSync(src);
      const rel = relative(templateDir, src);
      if (st.isDirectory()) {
        mkdirSync(join(outDir, rel), { recursive: true });
        walk(src);
        continue;
      }
      const dest = join(outDir, rel.endsWith(".hbs") ? rel.slice(0, -4) : rel);
      if (rel.endsWith(".hbs")) writeFileSync(dest, hb.compile(readFileSync(src, "utf8"), { strict: true, noEscape: true })(ctx));
      else copyFileSync(src, dest);
      chmodSync(dest, st.mode & 0o777);
      files.push(relative(outDir, dest));
    }
  };
  walk(templateDir);
  return files;
}
