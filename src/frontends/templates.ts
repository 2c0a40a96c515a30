/**
 * Reproducer templates (templates/<frontend>/), embedded in the executable as text. In a source
 * checkout the folder itself is used; inside the compiled binary the embedded copies are written
 * once to a content-hashed folder of the cache (with their mode bits), so the renderers can walk a
 * real folder either way.
 */
import Handlebars from "handlebars";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { cachedFolder, writeFolderAtomically, type CacheFile } from "../cache.ts";
import { shellQuote } from "../util/shell-quote.ts";
import cudaBuild from "../../templates/cuda/build.sh.hbs" with { type: "text" };
import cudaReadme from "../../templates/cuda/README.md.hbs" with { type: "text" };
import hipBuild from "../../templates/hip/build.sh.hbs" with { type: "text" };
import hipReadme from "../../templates/hip/README.md.hbs" with { type: "text" };
import tritonBuild from "../../templates/triton/build.sh.hbs" with { type: "text" };
import tritonReadme from "../../templates/triton/README.md.hbs" with { type: "text" };
import tritonRepro from "../../templates/triton/repro.py" with { type: "text" };

/** Every template file: path under templates/, text, mode bits. */
export const EMBEDDED_TEMPLATES: { path: string; text: string; mode: number }[] = [
  { path: "cuda/build.sh.hbs", text: cudaBuild, mode: 0o755 },
  { path: "cuda/README.md.hbs", text: cudaReadme, mode: 0o644 },
  { path: "hip/build.sh.hbs", text: hipBuild, mode: 0o755 },
  { path: "hip/README.md.hbs", text: hipReadme, mode: 0o644 },
  { path: "triton/build.sh.hbs", text: tritonBuild, mode: 0o755 },
  { path: "triton/README.md.hbs", text: tritonReadme, mode: 0o644 },
  { path: "triton/repro.py", text: tritonRepro, mode: 0o755 },
];

let root: string | undefined;

const templateFiles = (): CacheFile[] => EMBEDDED_TEMPLATES.map((t) => ({ path: t.path, bytes: t.text, mode: t.mode }));

/** Write the embedded templates into dir (atomically: a temp folder renamed; a lost race is fine). */
export function extractTemplates(dir: string): void {
  writeFolderAtomically(dir, templateFiles());
}

/** Folder holding cuda/, hip/, triton/ templates: the checkout's templates/ or the cache copy. */
export function templateRoot(): string {
  if (root) return root;
  const checkout = resolve(import.meta.dir, "../../templates");
  if (existsSync(join(checkout, "cuda"))) return (root = checkout);
  return (root = cachedFolder("templates", templateFiles()));
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
