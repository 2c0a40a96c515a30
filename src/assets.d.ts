declare module "*.so" {
  const path: string;
  export default path;
}
declare module "*.fatbin" {
  const path: string;
  export default path;
}
// the demo capture's files (src/capture/demo.ts), embedded one by one: each import is the file's path
declare module "*.md" {
  const path: string;
  export default path;
}
declare module "*.sh" {
  const path: string;
  export default path;
}
declare module "*.cubin" {
  const path: string;
  export default path;
}
declare module "*.bin" {
  const path: string;
  export default path;
}
declare module "*.cu" {
  const path: string;
  export default path;
}
// the confined build's sandbox program (c/common/kc_confine.c, src/frontends/sandbox.ts), embedded as a file
declare module "*/kerncap-confine" {
  const path: string;
  export default path;
}
