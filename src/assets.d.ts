declare module "*.so" {
  const path: string;
  export default path;
}
declare module "*.fatbin" {
  const path: string;
  export default path;
}
