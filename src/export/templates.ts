/** The export's templates (templates/export/), embedded in the executable as text (src/frontends/templates.ts renders them). */
import readme from "../../templates/export/README.md.hbs" with { type: "text" };
import reproC from "../../templates/export/repro.c" with { type: "text" };
import reproCommon from "../../templates/export/repro_common.h" with { type: "text" };
import makefile from "../../templates/export/Makefile" with { type: "text" };
import cmake from "../../templates/export/CMakeLists.txt" with { type: "text" };
import reproPy from "../../templates/export/repro.py" with { type: "text" };
import kcdata from "../../templates/export/kcdata.py" with { type: "text" };
import hsaReproC from "../../templates/export/hsa/repro.c" with { type: "text" };
import hsaMakefile from "../../templates/export/hsa/Makefile" with { type: "text" };
import hsaCmake from "../../templates/export/hsa/CMakeLists.txt" with { type: "text" };
import type { TemplateFile } from "../frontends/templates.ts";

export const EXPORT_TEMPLATES: readonly TemplateFile[] = [
  { path: "README.md.hbs", text: readme, mode: 0o644 },
  { path: "repro.c", text: reproC, mode: 0o644 },
  { path: "repro_common.h", text: reproCommon, mode: 0o644 },
  { path: "Makefile", text: makefile, mode: 0o644 },
  { path: "CMakeLists.txt", text: cmake, mode: 0o644 },
  { path: "repro.py", text: reproPy, mode: 0o755 },
  { path: "kcdata.py", text: kcdata, mode: 0o644 },
  // an AMD capture's HSA program and build files, moved over the CUDA ones by src/export/export.ts
  { path: "hsa/repro.c", text: hsaReproC, mode: 0o644 },
  { path: "hsa/Makefile", text: hsaMakefile, mode: 0o644 },
  { path: "hsa/CMakeLists.txt", text: hsaCmake, mode: 0o644 },
];
