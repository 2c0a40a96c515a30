/** The CUDA C++ reproducer's templates (templates/cuda/), embedded in the executable as text (src/frontends/templates.ts). */
import readme from "../../../templates/cuda/README.md.hbs" with { type: "text" };
import buildSh from "../../../templates/cuda/build.sh.hbs" with { type: "text" };
import type { TemplateFile } from "../templates.ts";

export const CUDA_TEMPLATES: readonly TemplateFile[] = [
  { path: "README.md.hbs", text: readme, mode: 0o644 },
  { path: "build.sh.hbs", text: buildSh, mode: 0o755 },
];
