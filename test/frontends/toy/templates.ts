/** The toy frontend's templates (./build.sh.hbs, ./recipe.txt), embedded as text like a real frontend's. */
import build from "./build.sh.hbs" with { type: "text" };
import recipe from "./recipe.txt" with { type: "text" };
import type { TemplateFile } from "../../../src/frontends/templates.ts";

export const TOY_TEMPLATES: readonly TemplateFile[] = [
  { path: "build.sh.hbs", text: build, mode: 0o755 },
  { path: "recipe.txt", text: recipe, mode: 0o644 },
];
